// The server's settings (initializationOptions and workspace/didChangeConfiguration), read from the
// `atenlens.<section>.<key>` configuration that package.json declares, as {section: {key: value}}.
// The server owns the defaults; package.json repeats them (tests/test_extension_settings.py checks that both
// agree) and this module lists no key or default of its own.
import * as vscode from "vscode";

export type ServerSettings = Record<string, Record<string, unknown>>;

/** Settings that change how the server is started rather than what it does. */
export const CLIENT_ONLY_SETTINGS = ["atenlens.interpreter"];

/** The `atenlens.<section>.<key>` names declared in package.json that the server reads. */
export function serverSettingNames(packageJson: {
  contributes?: { configuration?: { properties?: Record<string, unknown> } };
}): string[] {
  const properties = packageJson?.contributes?.configuration?.properties ?? {};
  return Object.keys(properties).filter((name) => !CLIENT_ONLY_SETTINGS.includes(name) && name.split(".").length === 3);
}

export function serverSettings(names: string[], resource: vscode.Uri | undefined): ServerSettings {
  const config = vscode.workspace.getConfiguration("atenlens", resource);
  const settings: ServerSettings = {};
  for (const name of names) {
    const [, section, key] = name.split(".");
    (settings[section] ??= {})[key] = config.get(`${section}.${key}`);
  }
  // Tracing runs the workspace's code: never before the workspace is trusted.
  settings.trace ??= {};
  settings.trace.enabled = vscode.workspace.isTrusted && settings.trace.enabled !== false;
  return settings;
}
