// Bundles the extension and its npm dependencies into one CommonJS file; `vscode` comes from the host.
import { build } from "esbuild";

await build({
  entryPoints: ["client/src/extension.ts"],
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node20",
  external: ["vscode"],
  outfile: "client/out/extension.js",
  sourcemap: "linked",
  minify: process.argv.includes("--minify"),
  logLevel: "warning",
});
