// The atenlens extension: starts the language server with the right interpreter, passes it the settings
// (tracing only in trusted workspaces), adds commands and a status bar item that follows the active file,
// says once when the interpreter has no torch, restarts the server when the interpreter, the environment or
// the workspace's trust changes.
import { randomUUID } from "crypto";
import * as vscode from "vscode";
import {
  ClientCapabilities,
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  StaticFeature,
  WorkDoneProgress,
} from "vscode-languageclient/node";
import { Interpreter, primaryResource, pythonExtensionApi, resolveInterpreter } from "./interpreter";
import { launcherScript, serverExecutable } from "./server";
import { serverSettingNames, serverSettings } from "./settings";
import { FileStatus, ServerFacts, StatusItem, describeFacts } from "./status";
import { warnIfNoTorch } from "./torch";
import { describeTraceResult, describeTraceTarget } from "./trace";

const TRACE_COMMAND = "atenlens.trace";
const FILE_STATUS = "atenlens/fileStatus";
const SERVER_INFO = "atenlens/serverInfo";

/** Asks the server for `atenlens/fileStatus` (lsp/status.py): the status bar's facts about each file. */
const fileStatusFeature: StaticFeature = {
  fillClientCapabilities(capabilities: ClientCapabilities): void {
    capabilities.experimental = { ...(capabilities.experimental as object | undefined), atenlensFileStatus: true };
  },
  initialize(): void {},
  getState: () => ({ kind: "static" }),
  clear(): void {},
};

const EXPORT_MEMORY_TIMELINE_COMMAND = "atenlens.exportMemoryTimeline";

class AtenlensExtension implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private interpreter: Interpreter | undefined;
  private lifecycle: Promise<void> = Promise.resolve();
  private readonly settingNames: string[];
  private readonly disposables: vscode.Disposable[] = [];
  private watcher: vscode.FileSystemWatcher | undefined;

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly log: vscode.LogOutputChannel,
    private readonly status: StatusItem,
  ) {
    this.settingNames = serverSettingNames(context.extension.packageJSON);
  }

  /** Start, stop and restart run one after another, never interleaved. */
  private enqueue(step: () => Promise<void>): Promise<void> {
    this.lifecycle = this.lifecycle.then(step, step);
    return this.lifecycle;
  }

  start(): Promise<void> {
    return this.enqueue(() => this.startClient());
  }

  restart(reason: string): Promise<void> {
    this.log.info(`Restarting the server: ${reason}`);
    return this.enqueue(async () => {
      await this.stopClient();
      await this.startClient();
    });
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.stopClient());
  }

  /** One watcher of the workspace's pyproject.toml files for the life of the extension (restarts reuse it). */
  private pyprojectWatcher(): vscode.FileSystemWatcher {
    if (this.watcher === undefined) {
      this.watcher = vscode.workspace.createFileSystemWatcher("**/pyproject.toml");
      this.disposables.push(this.watcher);
    }
    return this.watcher;
  }

  private settings(): Record<string, Record<string, unknown>> {
    return serverSettings(this.settingNames, primaryResource());
  }

  private async startClient(): Promise<void> {
    const resource = primaryResource();
    const interpreter = await resolveInterpreter(resource, this.log);
    this.interpreter = interpreter;
    const cwd = resource ? vscode.workspace.getWorkspaceFolder(resource)?.uri.fsPath : undefined;
    const executable = serverExecutable(interpreter, launcherScript(this.context), cwd);
    this.log.info(`Starting the server with ${interpreter.command} (from ${describeSource(interpreter)})`);
    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: "file", language: "python" },
        { scheme: "untitled", language: "python" },
      ],
      outputChannel: this.log,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      // A pyproject.toml changed on disk (not only saved here) may choose other lint rules.
      synchronize: { fileEvents: this.pyprojectWatcher() },
      initializationOptions: this.settings(),
      middleware: {
        // Every trace goes through `trace` (code lenses too): the status bar follows it.
        executeCommand: (command, args, next) => (command === TRACE_COMMAND ? this.trace(args) : next(command, args)),
        workspace: {
          // A server that pulls its settings gets the same, trust-aware values as initializationOptions.
          configuration: async (params, token, next) => {
            const answers = await next(params, token);
            if (!Array.isArray(answers)) {
              return answers;
            }
            return params.items.map((item, i) => (item.section === "atenlens" ? this.settings() : answers[i]));
          },
        },
      },
    };
    const client = new LanguageClient("atenlens", "atenlens", { run: executable, debug: executable }, clientOptions);
    client.registerFeature(fileStatusFeature);
    client.onNotification(FILE_STATUS, (status: FileStatus) => this.status.fileStatus(status));
    this.client = client;
    this.status.starting();
    try {
      await client.start();
    } catch (error) {
      const message =
        `The atenlens server did not start with ${interpreter.command} (from ${describeSource(interpreter)}): ` +
        `${errorText(error)}. See the log; "atenlens.interpreter" chooses the Python (3.11 or newer).`;
      this.log.error(message);
      this.status.failed(message);
      void vscode.window.showErrorMessage(message, "Show the log").then((choice) => choice && this.log.show());
      return;
    }
    const facts = await this.serverFacts(client);
    this.status.started(facts);
    if (facts?.python) {
      this.log.info(`The server and its traces run with ${describeFacts(facts)}`);
    }
    if (facts && vscode.workspace.isTrusted && tracingEnabled()) {
      void warnIfNoTorch(this.context, facts, interpreter);
    }
  }

  private async serverFacts(client: LanguageClient): Promise<ServerFacts | undefined> {
    try {
      return await client.sendRequest<ServerFacts>(SERVER_INFO, {});
    } catch (error) {
      this.log.warn(`${SERVER_INFO}: ${errorText(error)}`);
      return undefined;
    }
  }

  private async stopClient(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (!client) {
      return;
    }
    try {
      await client.stop(5000);
    } catch (error) {
      this.log.warn(`Stopping the server: ${errorText(error)}`);
    }
    await client.dispose().catch(() => undefined);
  }

  sendSettings(): void {
    const client = this.client;
    if (client?.isRunning()) {
      void client.sendNotification(DidChangeConfigurationNotification.type, {
        settings: { atenlens: this.settings() },
      });
    }
  }

  /** workspace/executeCommand atenlens.trace, with its progress and its outcome in the status bar. */
  async trace(args: unknown[]): Promise<unknown> {
    const client = this.client;
    if (!client?.isRunning()) {
      void vscode.window.showWarningMessage("The atenlens server is not running; see the log.");
      return undefined;
    }
    if (!vscode.workspace.isTrusted) {
      void vscode.window.showInformationMessage(
        "atenlens traces only in trusted workspaces: tracing runs the workspace's code.",
      );
      return undefined;
    }
    const target = describeTraceTarget(args[0]);
    const uri = traceUri(args[0]);
    const workDoneToken = randomUUID();
    this.status.tracing(uri, target);
    const progress = client.onProgress(WorkDoneProgress.type, workDoneToken, (value) => {
      if (value.kind !== "end" && value.message) {
        this.status.tracing(uri, target, value.message);
      }
    });
    try {
      const result = await client.sendRequest(ExecuteCommandRequest.type, {
        command: TRACE_COMMAND,
        arguments: args,
        workDoneToken,
      });
      const outcome = describeTraceResult(target, result);
      this.log.info(`Trace of ${target}: ${outcome.detail}`);
      // a trace the server keeps comes back in the file's status; one it does not (a worker that failed,
      // a cancel) is this file's until its next trace
      this.status.traced(uri, outcome.kept ? undefined : outcome.summary);
      return result;
    } catch (error) {
      const message = `Tracing ${target} failed: ${errorText(error)}`;
      this.log.error(message);
      this.status.traced(uri, `${target}: failed`);
      void vscode.window.showErrorMessage(message, "Show the log").then((choice) => choice && this.log.show());
      return undefined;
    } finally {
      progress.dispose();
    }
  }

  traceAtCursor(): Promise<unknown> {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.languageId !== "python") {
      void vscode.window.showInformationMessage("Put the cursor inside a Python function to trace it.");
      return Promise.resolve(undefined);
    }
    const { line, character } = editor.selection.active;
    return this.trace([{ uri: editor.document.uri.toString(), position: { line, character } }]);
  }

  /** The memory timeline of the last trace of the function at the cursor, as a Chrome trace-event file
   * (Perfetto, chrome://tracing) where the user chooses; the server writes it and says where. */
  async exportMemoryTimelineAtCursor(): Promise<unknown> {
    const editor = vscode.window.activeTextEditor;
    const client = this.client;
    if (!editor || editor.document.languageId !== "python") {
      void vscode.window.showInformationMessage(
        "Put the cursor inside a traced Python function to export its memory timeline.",
      );
      return undefined;
    }
    if (!client?.isRunning()) {
      void vscode.window.showWarningMessage("The atenlens server is not running; see the log.");
      return undefined;
    }
    const { line, character } = editor.selection.active;
    const document = editor.document.uri;
    const target = await vscode.window.showSaveDialog({
      defaultUri:
        document.scheme === "file"
          ? vscode.Uri.file(document.fsPath.replace(/\.py$/, ".memory-timeline.json"))
          : undefined,
      filters: { "Chrome trace (Perfetto, chrome://tracing)": ["json"] },
      title: "atenlens: export the memory timeline of the last trace",
    });
    if (!target) {
      return undefined;
    }
    return client.sendRequest(ExecuteCommandRequest.type, {
      command: EXPORT_MEMORY_TIMELINE_COMMAND,
      arguments: [{ uri: editor.document.uri.toString(), position: { line, character }, path: target.fsPath }],
    });
  }

  /** Restart when the Python extension's environment changes, if that is where the interpreter came from. */
  async watchPythonEnvironment(): Promise<void> {
    try {
      const api = await pythonExtensionApi();
      if (!api) {
        return;
      }
      this.disposables.push(
        api.environments.onDidChangeActiveEnvironmentPath(() => {
          if (this.interpreter?.source !== "setting") {
            void this.restart("the Python environment changed");
          }
        }),
      );
    } catch (error) {
      this.log.warn(`Not following the Python extension's environment: ${errorText(error)}`);
    }
  }

  dispose(): void {
    this.disposables.forEach((d) => d.dispose());
  }
}

function tracingEnabled(): boolean {
  return vscode.workspace.getConfiguration("atenlens", primaryResource()).get<boolean>("trace.enabled", true) !== false;
}

function traceUri(argument: unknown): string {
  const uri = argument !== null && typeof argument === "object" ? (argument as Record<string, unknown>).uri : undefined;
  return typeof uri === "string" ? uri : "";
}

function describeSource(interpreter: Interpreter): string {
  switch (interpreter.source) {
    case "setting":
      return 'the "atenlens.interpreter" setting';
    case "python-extension":
      return "the Python extension's environment";
    case "path":
      return "PATH";
  }
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

let extension: AtenlensExtension | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  // vscode-languageclient >= 10 writes through a LogOutputChannel's levelled methods.
  const log = vscode.window.createOutputChannel("atenlens", { log: true });
  const status = new StatusItem("atenlens.showLog", () => vscode.workspace.isTrusted && tracingEnabled());
  const ext = new AtenlensExtension(context, log, status);
  extension = ext;
  context.subscriptions.push(
    log,
    status,
    ext,
    vscode.commands.registerCommand("atenlens.traceAtCursor", () => ext.traceAtCursor()),
    vscode.commands.registerCommand("atenlens.restartServer", () => ext.restart("asked by the user")),
    vscode.commands.registerCommand("atenlens.exportMemoryTimelineAtCursor", () => ext.exportMemoryTimelineAtCursor()),
    vscode.commands.registerCommand("atenlens.showLog", () => log.show()),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration("atenlens.interpreter")) {
        void ext.restart('"atenlens.interpreter" changed');
      } else if (event.affectsConfiguration("atenlens")) {
        ext.sendSettings();
        status.refresh();
      }
    }),
    // Trust brings tracing and the workspace's own interpreter setting and environments: start afresh.
    vscode.workspace.onDidGrantWorkspaceTrust(() => ext.restart("the workspace is trusted now")),
  );
  void ext.watchPythonEnvironment();
  await ext.start();
}

export async function deactivate(): Promise<void> {
  await extension?.stop();
  extension = undefined;
}
