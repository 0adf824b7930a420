// First run: the chosen interpreter has no torch. The lint works without it, tracing does not; say so once
// per interpreter (not on every restart or trace), with an action that opens where the interpreter is chosen.
import * as vscode from "vscode";
import { Interpreter, pythonExtensionApi } from "./interpreter";
import { ServerFacts } from "./status";

const SILENCED_KEY = "atenlens.noTorchSilenced"; // interpreters the user said not to be told about again
const told = new Set<string>(); // interpreters told about in this window

export const CHOOSE_SETTING = "Choose the interpreter";
export const SELECT_PYTHON = "Select a Python environment";
export const DONT_SHOW = "Don't show again";

export function noTorchMessage(executable: string): string {
  return (
    `atenlens: ${executable} has no torch, so tracing cannot run (the lint works without it). ` +
    `Choose a Python that has torch in "atenlens.interpreter" or in the Python extension.`
  );
}

export async function warnIfNoTorch(
  context: vscode.ExtensionContext,
  facts: ServerFacts,
  interpreter: Interpreter,
): Promise<void> {
  const executable = facts.python?.executable ?? interpreter.command;
  if (facts.torch !== null || told.has(executable)) {
    return; // torch is there, or this interpreter's facts are unknown (undefined), or it was said
  }
  told.add(executable);
  const silenced = context.globalState.get<string[]>(SILENCED_KEY, []);
  if (silenced.includes(executable)) {
    return;
  }
  const actions = [CHOOSE_SETTING];
  if (await pythonExtensionApi().catch(() => undefined)) {
    actions.push(SELECT_PYTHON);
  }
  actions.push(DONT_SHOW);
  const choice = await vscode.window.showWarningMessage(noTorchMessage(executable), ...actions);
  if (choice === CHOOSE_SETTING) {
    await vscode.commands.executeCommand("workbench.action.openSettings", "atenlens.interpreter");
  } else if (choice === SELECT_PYTHON) {
    await vscode.commands.executeCommand("python.setInterpreter");
  } else if (choice === DONT_SHOW) {
    await context.globalState.update(SILENCED_KEY, [...silenced, executable]);
  }
}
