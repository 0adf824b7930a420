// One status bar item: what the server is doing (starting, tracing with progress), the last trace's summary,
// or the last error. A click opens the log.
import * as vscode from "vscode";

export class StatusItem implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;

  constructor(showLogCommand: string) {
    this.item = vscode.window.createStatusBarItem("atenlens.status", vscode.StatusBarAlignment.Left, 10);
    this.item.name = "atenlens";
    this.item.command = showLogCommand;
    this.idle("starting");
    this.item.show();
  }

  idle(state: string): void {
    this.set("$(telescope) atenlens", `atenlens: ${state}. Click for the log.`);
  }

  tracing(target: string, progress?: string): void {
    const detail = progress ? `: ${progress}` : "";
    this.set(`$(sync~spin) atenlens: tracing ${target}${detail}`, `Tracing ${target}${detail}`);
  }

  traced(summary: string, detail: string): void {
    this.set(`$(pulse) ${summary}`, `${detail}\n\nClick for the log.`);
  }

  failed(message: string): void {
    this.set("$(error) atenlens", `${message}\n\nClick for the log.`, new vscode.ThemeColor("statusBarItem.errorBackground"));
  }

  warned(text: string, message: string): void {
    this.set(`$(warning) ${text}`, `${message}\n\nClick for the log.`, new vscode.ThemeColor("statusBarItem.warningBackground"));
  }

  private set(text: string, tooltip: string, background?: vscode.ThemeColor): void {
    this.item.text = text;
    this.item.tooltip = tooltip;
    this.item.backgroundColor = background;
  }

  dispose(): void {
    this.item.dispose();
  }
}
