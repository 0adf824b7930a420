// One status bar item that follows the active Python file, as a language status item does: that file's
// problems and its latest trace (traced, stale, not traced), a trace running in it, or what the server is
// doing (starting, failed). Hidden for other files. Its tooltip names the Python and torch the server runs
// with. A click opens the log. The file facts come from the server's `atenlens/fileStatus` notification.
import * as path from "path";
import * as vscode from "vscode";

export interface TraceStatus {
  readonly qualname: string;
  readonly status: string;
  readonly summary: string; // the summary lens's text
  readonly brief: string; // its counts alone, or `trace error` / `trace timeout`
  readonly stale: boolean; // edited since the trace
}

export interface FileStatus {
  readonly uri: string;
  readonly version: number | null;
  readonly problems: number;
  readonly traces: readonly TraceStatus[]; // latest last
}

/** `atenlens/serverInfo`'s answer, the parts shown here. */
export interface ServerFacts {
  readonly python?: { readonly executable: string; readonly version: string };
  readonly torch?: { readonly version: string; readonly location: string } | null;
}

type ServerState =
  { readonly kind: "starting" } | { readonly kind: "running" } | { readonly kind: "failed"; readonly message: string };

interface Running {
  readonly target: string;
  readonly progress?: string;
}

export function describeFacts(facts: ServerFacts | undefined): string {
  if (!facts?.python) {
    return "";
  }
  const python = `Python ${facts.python.version} (${facts.python.executable})`;
  const torch = facts.torch ? `torch ${facts.torch.version}` : "no torch (tracing needs it; the lint does not)";
  return `${python} · ${torch}`;
}

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

export class StatusItem implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private readonly disposables: vscode.Disposable[] = [];
  private server: ServerState = { kind: "starting" };
  private facts: ServerFacts | undefined;
  private readonly files = new Map<string, FileStatus>();
  private readonly running = new Map<string, Running>(); // uri -> its trace in flight
  private readonly failures = new Map<string, string>(); // uri -> a trace that gave no result, and why

  constructor(
    showLogCommand: string,
    private readonly tracingAllowed: () => boolean,
  ) {
    this.item = vscode.window.createStatusBarItem("atenlens.status", vscode.StatusBarAlignment.Left, 10);
    this.item.name = "atenlens";
    this.item.command = showLogCommand;
    this.disposables.push(
      vscode.window.onDidChangeActiveTextEditor(() => this.render()),
      vscode.workspace.onDidCloseTextDocument((document) => this.forget(document.uri.toString())),
    );
    this.render();
  }

  starting(): void {
    this.server = { kind: "starting" };
    this.facts = undefined;
    this.files.clear();
    this.running.clear();
    this.render();
  }

  started(facts: ServerFacts | undefined): void {
    this.server = { kind: "running" };
    this.facts = facts;
    this.render();
  }

  failed(message: string): void {
    this.server = { kind: "failed", message };
    this.render();
  }

  fileStatus(status: FileStatus): void {
    this.files.set(status.uri, status);
    this.render();
  }

  tracing(uri: string, target: string, progress?: string): void {
    this.failures.delete(uri);
    this.running.set(uri, { target, progress });
    this.render();
  }

  /** The trace of `uri` ended; `failure` when it gave no result the server keeps (it failed, was cancelled). */
  traced(uri: string, failure?: string): void {
    this.running.delete(uri);
    if (failure) {
      this.failures.set(uri, failure);
    }
    this.render();
  }

  /** Settings or trust changed: what the file says may too. */
  refresh(): void {
    this.render();
  }

  private forget(uri: string): void {
    this.files.delete(uri);
    this.failures.delete(uri);
    this.render();
  }

  private render(): void {
    const facts = describeFacts(this.facts);
    if (this.server.kind === "failed") {
      // shown whatever the active file: nothing works until it is fixed
      this.set("$(error) atenlens", `${this.server.message}\n\nClick for the log.`, "statusBarItem.errorBackground");
      return;
    }
    const document = vscode.window.activeTextEditor?.document;
    if (!document || document.languageId !== "python") {
      this.item.hide();
      return;
    }
    const uri = document.uri.toString();
    const name = path.basename(document.uri.path);
    if (this.server.kind === "starting") {
      this.set("$(loading~spin) atenlens: starting", `atenlens: starting the server.\n\nClick for the log.`);
      return;
    }
    const running = this.running.get(uri);
    if (running) {
      const detail = running.progress ? `: ${running.progress}` : "";
      this.set(
        `$(sync~spin) atenlens: tracing ${running.target}${detail}`,
        `Tracing ${running.target} in ${name}${detail}\n\n${facts}`,
      );
      return;
    }
    const file = this.files.get(uri);
    const problems = file?.problems ?? 0;
    const latest = file?.traces[file.traces.length - 1];
    const failure = this.failures.get(uri);
    const noTorch = this.facts?.torch === null; // the server's Python has none: tracing cannot run
    const lintOnly = noTorch || !this.tracingAllowed();
    let icon: string;
    let state: string;
    if (failure) {
      icon = "$(warning)";
      state = failure;
    } else if (latest?.stale) {
      icon = "$(history)";
      state = `${latest.qualname}: stale`;
    } else if (latest) {
      icon = latest.status === "ok" ? "$(pulse)" : "$(warning)";
      state = `${latest.qualname}: ${latest.brief}`;
    } else if (lintOnly) {
      icon = "$(telescope)";
      state = "atenlens: lint only";
    } else {
      icon = "$(telescope)";
      state = "atenlens: not traced";
    }
    if (problems) {
      icon = "$(warning)";
    }
    const text = `${icon} ${state}${problems ? ` · ${plural(problems, "problem")}` : ""}`;
    const lines = [`atenlens · ${name}`, problems ? `${plural(problems, "problem")} (see Problems)` : "no problems"];
    for (const trace of file?.traces ?? []) {
      lines.push(
        `${trace.qualname}: ${trace.summary}${trace.stale ? " (stale: edited since the trace; trace it again)" : ""}`,
      );
    }
    if (!latest && !failure) {
      lines.push(
        noTorch
          ? "lint only: this Python has no torch, which tracing needs"
          : lintOnly
            ? "lint only: tracing is off (the workspace is not trusted, or atenlens.trace.enabled is false)"
            : "not traced: click a Trace this step lens",
      );
    }
    if (failure) {
      lines.push(failure);
    }
    if (facts) {
      lines.push("", facts);
    }
    lines.push("", "Click for the log.");
    // a problem is the Problems panel's to count loudly; a trace that did not finish is this item's
    const unfinished = failure !== undefined || (latest !== undefined && !latest.stale && latest.status !== "ok");
    this.set(text, lines.join("\n"), unfinished ? "statusBarItem.warningBackground" : undefined);
  }

  private set(text: string, tooltip: string, background?: string): void {
    this.item.text = text;
    this.item.tooltip = tooltip;
    this.item.backgroundColor = background ? new vscode.ThemeColor(background) : undefined;
    this.item.show();
  }

  dispose(): void {
    this.disposables.forEach((d) => d.dispose());
    this.item.dispose();
  }
}
