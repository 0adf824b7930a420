// Which Python runs the language server (and, through it, the traces): the `atenlens.interpreter` setting,
// else the Python extension's active environment when that extension is installed, else `python3` on PATH.
import * as os from "os";
import * as vscode from "vscode";
import { PythonExtension } from "@vscode/python-extension";

export type InterpreterSource = "setting" | "python-extension" | "path";

export interface Interpreter {
  readonly command: string;
  readonly source: InterpreterSource;
}

const PYTHON_EXTENSION_ID = "ms-python.python";

/** The folder whose settings and environment decide the interpreter (one server serves the whole window). */
export function primaryResource(): vscode.Uri | undefined {
  return vscode.workspace.workspaceFolders?.[0]?.uri ?? vscode.window.activeTextEditor?.document.uri;
}

function expandVariables(value: string, resource: vscode.Uri | undefined): string {
  const folder = resource ? vscode.workspace.getWorkspaceFolder(resource) : undefined;
  let expanded = value.replace(/\$\{userHome\}/g, os.homedir());
  if (folder) {
    expanded = expanded.replace(/\$\{workspaceFolder\}/g, folder.uri.fsPath);
  }
  if (expanded === "~" || expanded.startsWith("~/")) {
    expanded = os.homedir() + expanded.slice(1);
  }
  return expanded;
}

/** The Python extension's API, or undefined when the extension is not installed (it is optional). */
export async function pythonExtensionApi(): Promise<PythonExtension | undefined> {
  if (!vscode.extensions.getExtension(PYTHON_EXTENSION_ID)) {
    return undefined;
  }
  return PythonExtension.api();
}

async function activeEnvironmentExecutable(
  api: PythonExtension,
  resource: vscode.Uri | undefined,
): Promise<string | undefined> {
  const active = api.environments.getActiveEnvironmentPath(resource);
  const resolved = await api.environments.resolveEnvironment(active);
  return resolved?.executable.uri?.fsPath;
}

/**
 * In an untrusted workspace VS Code hides the workspace's value of `atenlens.interpreter` (it is a restricted
 * setting) and the workspace's environments are not consulted either: an interpreter inside the workspace is
 * code from the workspace.
 */
export async function resolveInterpreter(
  resource: vscode.Uri | undefined,
  log: vscode.LogOutputChannel,
): Promise<Interpreter> {
  const configured = vscode.workspace.getConfiguration("atenlens", resource).get<string>("interpreter", "").trim();
  if (configured) {
    return { command: expandVariables(configured, resource), source: "setting" };
  }
  if (vscode.workspace.isTrusted) {
    try {
      const api = await pythonExtensionApi();
      const executable = api ? await activeEnvironmentExecutable(api, resource) : undefined;
      if (executable) {
        return { command: executable, source: "python-extension" };
      }
    } catch (error) {
      log.warn(`The Python extension did not give an environment: ${String(error)}`);
    }
  }
  return { command: process.platform === "win32" ? "python" : "python3", source: "path" };
}
