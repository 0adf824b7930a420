// How the language server process is started: the chosen interpreter runs the server package bundled in the
// extension (bundled/libs: atenlens and its pure-Python dependencies), so the user's environment needs
// nothing but torch, and only for tracing.
import * as path from "path";
import * as vscode from "vscode";
import { Executable, TransportKind } from "vscode-languageclient/node";
import { Interpreter } from "./interpreter";

// Runs as `python -c BOOTSTRAP LIBS`. It replaces sys.path[0] (the working folder, a workspace folder) with
// the bundled libraries so that no file of the workspace shadows a module of the server, and says plainly
// when the interpreter is too old. PYTHONPATH carries the same folder to the trace worker that the server
// starts with the same interpreter.
const BOOTSTRAP = [
  "import sys",
  "if sys.version_info < (3, 11): sys.exit('atenlens needs Python 3.11 or newer; ' + sys.executable + ' is ' + sys.version.split()[0])",
  "sys.path[0] = sys.argv[1]",
  "sys.argv = ['atenlens', 'serve']",
  "import runpy",
  "runpy.run_module('atenlens', run_name='__main__', alter_sys=True)",
].join("\n");

export function bundledLibs(context: vscode.ExtensionContext): string {
  return context.asAbsolutePath(path.join("bundled", "libs"));
}

export function serverExecutable(interpreter: Interpreter, libs: string, cwd: string | undefined): Executable {
  const pythonPath = [libs, process.env.PYTHONPATH].filter((p) => p).join(path.delimiter);
  return {
    command: interpreter.command,
    args: ["-c", BOOTSTRAP, libs],
    transport: TransportKind.stdio,
    options: { cwd, env: { ...process.env, PYTHONPATH: pythonPath, PYTHONUNBUFFERED: "1" } },
  };
}
