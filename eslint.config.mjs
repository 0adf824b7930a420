// The lint gate of the extension's TypeScript (client/src): ESLint's and typescript-eslint's recommended
// rules. Formatting is prettier's (.prettierrc.json); `tsc --noEmit` (npm run typecheck) checks the types.
import js from "@eslint/js";
import { defineConfig } from "eslint/config";
import tseslint from "typescript-eslint";

export default defineConfig([
  {
    files: ["client/src/**/*.ts"],
    extends: [js.configs.recommended, tseslint.configs.recommended],
  },
]);
