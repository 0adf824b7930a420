// Packages the extension for one platform, offline but for the Python package index:
// bundles the server and its dependencies (client/bundle_server.py), then runs vsce.
//   npm run package                          -> atenlens-<this platform>.vsix
//   ATENLENS_TARGET=linux-arm64 npm run package
// vsce 4 needs Node 22 or newer (package.json engines.node).
// The Python that runs the bundling script: $PYTHON, else python3 (it needs pip).
import { execFileSync } from "node:child_process";

const arch = { x64: "x64", arm64: "arm64" }[process.arch] ?? process.arch;
const target = process.env.ATENLENS_TARGET || `${process.platform}-${arch}`;
const python = process.env.PYTHON || "python3";
const run = (command, args) => execFileSync(command, args, { stdio: "inherit" });

run(python, ["client/bundle_server.py", "--target", target]);
// The Marketplace page is client/README.md and client/CHANGELOG.md; their relative links (../docs/...)
// resolve against the repository's client/ folder.
const repository = "https://github.com/atenlens/atenlens";
run("npx", ["--no-install", "vsce", "package", "--no-dependencies", "--target", target, "-o", `atenlens-${target}.vsix`,
  "--readme-path", "client/README.md", "--changelog-path", "client/CHANGELOG.md",
  "--baseContentUrl", `${repository}/blob/HEAD/client`, "--baseImagesUrl", `${repository}/raw/HEAD/client`]);
