// How the language server process is started: the chosen interpreter runs the server package bundled in the
// extension (bundled/libs: atenlens and its dependencies), so the user's environment needs
// nothing but torch, and only for tracing.
import * as path from "path";
import * as vscode from "vscode";
import { Executable } from "vscode-languageclient/node";
import { Interpreter } from "./interpreter";

// client/serve.py puts bundled/libs first on sys.path (and on PYTHONPATH for the trace worker) and
// says plainly when the interpreter is too old.
export function launcherScript(context: vscode.ExtensionContext): string {
  return context.asAbsolutePath(path.join("client", "serve.py"));
}

export function serverExecutable(interpreter: Interpreter, launcher: string, cwd: string | undefined): Executable {
  return {
    command: interpreter.command,
    // stdio; no `transport`, which would append a `--stdio` argument
    args: [launcher],
    options: { cwd, env: { ...process.env, PYTHONUNBUFFERED: "1" } },
  };
}
