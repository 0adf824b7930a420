// Words for the status bar about one trace: what is traced, and how it went (from the command's result).

export interface TraceOutcome {
  readonly ok: boolean;
  readonly kept: boolean; // the server keeps it: the file's status shows it
  readonly summary: string; // short, for the status bar
  readonly detail: string; // longer, for the tooltip and the log
}

function field(value: unknown, key: string): unknown {
  return value !== null && typeof value === "object" ? (value as Record<string, unknown>)[key] : undefined;
}

/** `{uri, qualname}` -> the qualname; `{uri, position}` -> "the function at line N". */
export function describeTraceTarget(argument: unknown): string {
  const qualname = field(argument, "qualname");
  if (typeof qualname === "string" && qualname) {
    return qualname;
  }
  const line = field(field(argument, "position"), "line");
  return typeof line === "number" ? `the function at line ${line + 1}` : "the function";
}

/** The server answers atenlens.trace with the trace's status, the function's qualname and a summary line. */
export function describeTraceResult(target: string, result: unknown): TraceOutcome {
  const qualname = field(result, "qualname");
  const name = typeof qualname === "string" && qualname ? qualname : target;
  const status = field(result, "status");
  const summary = field(result, "summary");
  const message = field(result, "message");
  const text = typeof summary === "string" && summary ? summary : typeof message === "string" ? message : "";
  const kept = typeof summary === "string";
  if (status === "ok") {
    return { ok: true, kept, summary: `${name}: ${text || "traced"}`, detail: `${name}: ${text || "traced"}` };
  }
  const what = typeof status === "string" ? status : "no result";
  return { ok: false, kept, summary: `${name}: ${what}`, detail: `${name}: ${what}${text ? ` (${text})` : ""}` };
}
