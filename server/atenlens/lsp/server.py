"""`atenlens serve`: the language server. `AtenlensServer` holds what the handlers share: the
settings, the open documents, the lint of each (scheduled by lint_schedule.py) and the traces
(queued by trace_queue.py, run by the worker process). The handlers, in handlers.py, are glue: the
analysis lives in lint/, traceable.py, document_traces.py, labels.py, hover.py, the conversion in
convert.py.

This process never imports torch and never runs user code: linting is static, tracing happens
in the trace worker's child process, which is started on the first trace and never when
`trace.enabled` is false. The custom request `atenlens/serverInfo` reports both facts.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import os
import platform
import sys
from typing import Any, Optional

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from atenlens import __version__
from atenlens.lint import RULES, Finding, lint_source
from atenlens.lsp import convert
from atenlens.lsp.debug import register_debug_requests
from atenlens.lsp.document_traces import build_traced_function
from atenlens.lsp.documents import DocumentState, LintResult
from atenlens.lsp.early import Early
from atenlens.lsp.large import LARGE_DOCUMENT_CHARS, analyze_elsewhere
from atenlens.lsp.lint_config import WorkspaceLintConfig
from atenlens.lsp.lint_schedule import LintSchedule
from atenlens.lsp.problems import Problem, document_problems
from atenlens.lsp.protocol import WORK_DONE_TOKEN, AtenlensProtocol
from atenlens.lsp.settings import Settings, merge_problem_message, settings_from_json, trace_switch
from atenlens.lsp.status import FILE_STATUS, file_status, wants_file_status
from atenlens.lsp.text import UTF16, LineShift
from atenlens.lsp.trace_log import LogLine, trace_log_line
from atenlens.lsp.trace_queue import TraceJob, TraceQueue, TraceSpan
from atenlens.report import TraceRequest
from atenlens.traceable import FunctionInfo, function_at

logger = logging.getLogger(__name__)

NAME = "atenlens"
VERSION = __version__
PROGRESS_CREATE_SECONDS = 2.0  # how long a trace waits for the client to accept its progress token
LENS_TICK_SECONDS = 1.0  # how often the lens of a trace in flight is redrawn (its seconds)


class AtenlensServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            NAME, VERSION, text_document_sync_kind=types.TextDocumentSyncKind.Incremental, protocol_cls=AtenlensProtocol
        )
        self.settings = Settings()
        self.pending_settings_message: Optional[str] = None
        self.trace_decided_by = "no source has given trace.enabled yet"  # for the log: what decided tracing
        self.pending_trace_log = ""
        self.documents: dict[str, DocumentState] = {}
        self.lint_config = WorkspaceLintConfig(tuple(rule.code for rule in RULES))
        self.lints = LintSchedule(self.lint_now)
        self.traces = TraceQueue(self._make_worker)
        self._progress_ids = itertools.count(1)
        self._building: list[TraceSpan] = []  # spans of finished traces whose views are being built
        self._worker_logged = 0  # the worker start whose torch and Python were logged
        # What the process had imported when it published its first diagnostics (the editor's
        # wait at start-up): for `atenlens/serverInfo`, whose tests check that start-up imports
        # only what linting and publishing need.
        self.modules_at_first_diagnostics: Optional[list[str]] = None
        self._early_lint: Optional[tuple[str, int, str, list[Finding]]] = None  # see take_early_lint

    def adopt(self, early: Early) -> None:
        """Takes over from lsp/early.py: its answer to `initialize` and its first diagnostics are
        not sent again (lsp/protocol.py), its pyproject.toml reads are kept."""
        protocol = self.protocol
        assert isinstance(protocol, AtenlensProtocol)
        protocol.early = early
        if early.lint_config is not None:
            self.lint_config = early.lint_config
        if early.modules is not None:
            self.modules_at_first_diagnostics = early.modules
        self._early_lint = early.lint

    def take_early_lint(self, opened: types.TextDocumentItem) -> bool:
        """At the didOpen that lsp/early.py linted: its findings are this document's first lint
        (the same text, settings and pyproject.toml), published at once (not sent twice: the
        client has them). False for any other didOpen: that one is linted here."""
        early, self._early_lint = self._early_lint, None
        if early is None or early[:3] != (opened.uri, opened.version, opened.text):
            return False
        state, document = self.state(opened.uri), self.document(opened.uri)
        if document is None:
            return False
        state.lint = LintResult(version=opened.version, lines=state.lines(document.source), findings=early[3])
        self.lints.started[opened.uri] = self.lints.started.get(opened.uri, 0) + 1
        self.publish(opened.uri)
        return True

    # --- helpers used by the handlers -------------------------------------------------------

    @property
    def encoding(self) -> str:
        encoding = self.workspace.position_encoding
        return str(getattr(encoding, "value", encoding) or UTF16)

    def state(self, uri: str) -> DocumentState:
        if uri not in self.documents:
            self.documents[uri] = DocumentState(uri)
        return self.documents[uri]

    def document(self, uri: str) -> Optional[TextDocument]:
        if uri not in self.documents:
            return None
        return self.workspace.get_text_document(uri)

    def capability(self, path: str) -> bool:
        value: Any = self.client_capabilities
        for name in path.split("."):
            value = getattr(value, name, None)
            if value is None:
                return False
        return bool(value)

    def _make_worker(self) -> Any:
        from atenlens.worker.client import TraceWorker  # torch-free; imported only when tracing

        return TraceWorker(python=sys.executable, memory_limit_mb=self.settings.trace.memory_limit_mb)

    def decide_tracing(self, data: Any, source: str) -> tuple[Settings, list[str], str]:
        """Takes the settings `source` sent, with `trace.enabled` as the trust rule decides it
        (docs/security.md): on only while the last explicit, valid value given is true. Returns
        them, the rejected values, and the log line saying which source decided."""
        settings, problems = settings_from_json(data, enabled_before=self.settings.trace.enabled)
        switch = trace_switch(data)
        if switch.value is not None:
            self.trace_decided_by = f"{source}: {switch.why}"
            decided = self.trace_decided_by
        else:
            decided = f"{source} does not set it ({switch.why}); as before: {self.trace_decided_by}"
        self.settings = settings
        return settings, problems, f"atenlens: tracing is {'on' if settings.trace.enabled else 'off'}: {decided}"

    def log(self, message: str) -> None:
        logger.info(message)
        self.window_log_message(types.LogMessageParams(type=types.MessageType.Info, message=message))

    def apply_settings(self, data: Any, source: str) -> None:
        previous = self.settings
        settings, problems, decided = self.decide_tracing(data, source)
        self.log(decided)
        message = merge_problem_message(problems)
        if message:
            self.show(message, types.MessageType.Warning)
        if not settings.trace.enabled and previous.trace.enabled:
            # waiting traces are dropped too: none of them may start a worker now
            asyncio.get_running_loop().create_task(self.traces.close())
        elif previous.trace.memory_limit_mb != settings.trace.memory_limit_mb:
            asyncio.get_running_loop().create_task(self.traces.restart())

    def reconfigure(self, data: Any, source: str) -> None:
        self.apply_settings(data, source)
        for uri in list(self.documents):
            self.lints.schedule(uri)
        self.refresh_views()

    async def pull_configuration(self) -> None:
        source = "workspace/configuration"
        try:
            answer = await self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="atenlens")])
            )
        except Exception as error:  # an error, or an answer that is not a list: no values
            logger.warning("workspace/configuration failed: %r", error)
            answer, source = None, "workspace/configuration (an error or an answer that is not a list)"
        self.reconfigure(answer[0] if answer else None, source)

    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    # --- lint + diagnostics -----------------------------------------------------------------

    async def lint_now(self, uri: str) -> None:
        """Lints the document's current text and publishes it (when `self.lints` says so)."""
        document = self.document(uri)
        if document is None:
            return
        version, source = document.version, document.source
        lint = self.settings.lint
        findings: list[Finding] = []
        analysis = None
        large = len(source) > LARGE_DOCUMENT_CHARS
        codes, problem = None, None
        if lint.enabled:
            path = document.path if uri.startswith("file:") else None
            if large:
                codes, problem = await asyncio.to_thread(self.lint_config.codes, path, self.settings.lint)
            else:
                findings, problem = await asyncio.to_thread(self._lint_document, source, document.path, path)
            if problem:
                self.show(problem, types.MessageType.Warning)
        if large:  # parsed elsewhere, functions too (lsp/large.py)
            analysis = await analyze_elsewhere(source, document.path, codes, None, lint.enabled)
            if analysis.failure is not None:
                logger.warning("atenlens: %s: %s", uri, analysis.failure)
            findings = analysis.findings
        current = self.document(uri)
        if current is None or current.version != version:
            return  # a newer version is on its way to being linted
        state = self.documents.get(uri)
        if state is None:
            return  # closed meanwhile
        state.lint = LintResult(version=version, lines=state.lines(source), findings=findings)
        self.publish(uri)
        if analysis is not None and analysis.failure is None and state.found_functions(source, analysis.functions):
            self.refresh_views()  # its code lenses were those of the previous analysis

    def _lint_document(self, source: str, key: str, path: Optional[str]) -> tuple[list, Optional[str]]:
        """(findings, a message for the user): the rules that `[tool.atenlens]` and the editor's
        settings choose for `path` (runs in a thread: it reads the pyproject.toml). Incremental:
        only the top-level definitions an edit changed are linted again (lint/incremental.py)."""
        codes, problem = self.lint_config.codes(path, self.settings.lint)
        return lint_source(source, key, codes, incremental=True), problem

    def publish(self, uri: str) -> None:
        state, document = self.documents.get(uri), self.document(uri)
        if state is None or document is None or state.lint is None:
            return
        if document.version != state.lint.version:
            return  # a lint of the newer text is scheduled; it publishes both kinds, in step
        lines = state.lint.lines
        diagnostics, texts = [], []
        state.finding_diagnostics = {}  # the published diagnostic of each lint finding (for its fix)
        # A keystroke changes one definition's findings: the others' diagnostics, and their JSON,
        # are those of the last publication (converting and serialising 160 diagnostics of a
        # 5,000-line file took ~4 ms of every edit).
        published, kept = state.published, {}
        protocol = self.protocol
        assert isinstance(protocol, AtenlensProtocol)
        for problem in document_problems(state.lint.findings, state.traces, lines):
            key = _diagnostic_key(problem, lines, self.encoding)
            entry = published.get(key) if key is not None else None
            if entry is None:
                diagnostic = convert.lsp_problem_diagnostic(problem, lines, self.encoding)
                entry = (diagnostic, protocol.json_of(diagnostic))
            if key is not None:
                kept[key] = entry
            if problem.finding is not None:
                state.finding_diagnostics[problem.finding] = entry[0]
            diagnostics.append(entry[0])
            texts.append(entry[1])
        state.published = kept
        protocol.publish_diagnostics_json(uri, state.lint.version, texts)
        if self.modules_at_first_diagnostics is None:
            self.modules_at_first_diagnostics = sorted(sys.modules)
        self.send_file_status(uri, state, diagnostics)

    def log_worker_once(self) -> None:
        """Logs, once per worker process, the torch and Python the worker runs (what traces run on)."""
        ready = self.traces.worker_ready_info()
        if self.traces.worker_starts != self._worker_logged and ready.get("torch"):
            self._worker_logged = self.traces.worker_starts
            self.log(
                f"atenlens: the trace worker (pid {ready.get('pid')}) runs torch {ready['torch']} on Python "
                f"{platform.python_version()} ({sys.executable})"
            )

    def send_file_status(self, uri: str, state: DocumentState, diagnostics: list[types.Diagnostic]) -> None:
        """The file's line for the status bar (lsp/status.py), to a client that asked for it."""
        if wants_file_status(self.client_capabilities):
            version = state.lint.version if state.lint is not None else None
            self.protocol.notify(FILE_STATUS, file_status(uri, version, state.traces, diagnostics))

    def refresh_views(self) -> None:
        if self.capability("workspace.inlay_hint.refresh_support"):
            self.workspace_inlay_hint_refresh(None)
        if self.capability("workspace.code_lens.refresh_support"):
            self.workspace_code_lens_refresh(None)

    # --- tracing ----------------------------------------------------------------------------

    def resolve_target(self, argument: Any) -> tuple[TextDocument, FunctionInfo]:
        """`{"uri", "qualname"}` or `{"uri", "position": {"line", "character"}}` -> the function."""
        if isinstance(argument, list) and len(argument) == 1:
            argument = argument[0]
        if not isinstance(argument, dict) or not isinstance(argument.get("uri"), str):
            raise JsonRpcInvalidParams(
                message='expected [{"uri": ..., "qualname": ...}] or '
                '[{"uri": ..., "position": {"line": ..., "character": ...}}]'
            )
        uri = argument["uri"]
        document = self.document(uri)
        if document is None:
            raise JsonRpcInvalidParams(message=f"{uri} is not open")
        functions = self.state(uri).functions(document.source)
        info: Optional[FunctionInfo] = None
        if isinstance(argument.get("qualname"), str):
            info = next((f for f in functions if f.qualname == argument["qualname"]), None)
        elif isinstance(argument.get("position"), dict) and isinstance(argument["position"].get("line"), int):
            info = function_at(functions, argument["position"]["line"] + 1)
        else:
            raise JsonRpcInvalidParams(message="expected a qualname or a position")
        if info is None:
            raise JsonRpcInvalidParams(
                message="no traceable function there"
                + (f" named {argument['qualname']!r}" if "qualname" in argument else "")
            )
        return document, info

    async def run_trace(self, document: TextDocument, info: FunctionInfo, trigger: str = "command") -> dict[str, Any]:
        """Trace `info` and log one line saying how it ended (`trigger`: "command", "on save"); while it
        waits and runs, a client that can refresh code lenses is asked to every LENS_TICK_SECONDS, so
        the function's lens counts the seconds ("tracing… 3.1 s")."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        ticker = (
            loop.create_task(self._tick_lenses()) if self.capability("workspace.code_lens.refresh_support") else None
        )
        result: Optional[dict[str, Any]] = None
        try:
            result = await self._trace(document, info)
            return result
        except asyncio.CancelledError:
            result = {"status": "cancelled", "qualname": info.qualname, "message": "cancelled by the client"}
            raise
        except Exception as error:
            result = {"status": "error", "qualname": info.qualname, "message": f"{type(error).__name__}: {error}"}
            raise
        finally:
            if ticker is not None:
                ticker.cancel()
                self.workspace_code_lens_refresh(None)
            assert result is not None
            self.log_line(trace_log_line(result, trigger, loop.time() - started))

    async def _tick_lenses(self) -> None:
        self.workspace_code_lens_refresh(None)  # "waiting to trace…" or "tracing… 0.0 s" at once
        while True:
            await asyncio.sleep(LENS_TICK_SECONDS)
            self.workspace_code_lens_refresh(None)

    def log_line(self, line: LogLine) -> None:
        kind = {"error": types.MessageType.Error, "warning": types.MessageType.Warning}.get(
            line.severity, types.MessageType.Info
        )
        logger.info(line.message)
        self.window_log_message(types.LogMessageParams(type=kind, message=line.message))

    async def _trace(self, document: TextDocument, info: FunctionInfo) -> dict[str, Any]:
        uri, source = document.uri, document.source
        settings = self.settings.trace
        request = TraceRequest(
            file=document.path,
            qualname=info.qualname,
            device=settings.device,  # type: ignore[arg-type]
            timeout_seconds=settings.timeout_seconds,
            source=source,
            gpu=settings.gpu,
            compile=settings.compile,
            **_ranks_request(settings),
        )
        first = (info.directive_line or info.first_line) - 1
        span = TraceSpan(
            uri=uri, first=first, last=info.end_line - 1, def_line=info.line - 1, lines=self.state(uri).lines(source)
        )
        job = self.traces.submit((uri, info.qualname), request, span)
        token = None
        try:
            token = await self._begin_progress(job, f"atenlens: tracing {info.qualname}")
            # shielded: a cancelled request ($/cancelRequest) cancels this task, and the trace is
            # then killed through the queue (its future stays the queue's to finish)
            outcome = await asyncio.shield(job.future)
        except asyncio.CancelledError:
            self.traces.cancel(job, "cancelled by the client")
            raise
        finally:
            if token is not None:
                self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=job.reason or "done"))
                self.work_done_progress.tokens.pop(token, None)
        self.log_worker_once()
        if outcome.cancelled:
            return {"status": "cancelled", "qualname": info.qualname, "message": outcome.reason}
        if outcome.report is None:
            self.show(f"atenlens: the trace of {info.qualname} failed: {outcome.error}", types.MessageType.Error)
            return {"status": "error", "qualname": info.qualname, "message": outcome.error or ""}
        if self.document(uri) is None:
            return {"status": "closed", "qualname": info.qualname, "message": "the document was closed"}
        # in a thread: sorting up to MAX_EVENTS events onto lines must not hold up other requests
        # (edits meanwhile are recorded in span.shifts by on_text_change, as while it ran)
        self._building.append(span)
        try:
            traced = await asyncio.to_thread(
                build_traced_function,
                outcome.report,
                document.path,
                span.lines,
                info.qualname,
                span.first,
                span.last,
                span.def_line,
            )
        finally:
            self._building.remove(span)
        if self.document(uri) is None:
            return {"status": "closed", "qualname": info.qualname, "message": "the document was closed"}
        for shift in span.shifts:
            traced.shift(shift)
        current = self.document(uri)
        assert current is not None
        traced.revalidate(self.state(uri).lines(current.source))
        for note in outcome.report.notes:
            self.window_log_message(
                types.LogMessageParams(
                    type=types.MessageType.Info, message=f"atenlens: trace of {info.qualname}: {note}"
                )
            )
        state = self.state(uri)
        state.traces.put(traced)
        self.publish(uri)
        self.refresh_views()
        return {
            "status": outcome.report.status,
            "qualname": info.qualname,
            "summary": traced.summary,
            "message": outcome.report.message,
        }

    async def _begin_progress(self, job: TraceJob, title: str) -> Optional[types.ProgressToken]:
        """Begins the trace's work-done progress: under the `workDoneToken` the client sent with
        the command when it sent one (its own progress UI then shows the trace), else under a
        token the server creates, if the client supports that."""
        token = WORK_DONE_TOKEN.get()
        if token is None:
            if not self.capability("window.work_done_progress"):
                return None
            token = f"atenlens-trace-{os.getpid()}-{next(self._progress_ids)}"
            try:
                # the trace runs meanwhile; a client that never answers delays its answer this long at most
                await asyncio.wait_for(self.work_done_progress.create_async(token), PROGRESS_CREATE_SECONDS)
            except asyncio.TimeoutError:
                logger.warning(
                    "window/workDoneProgress/create was not answered within %g s: tracing without progress",
                    PROGRESS_CREATE_SECONDS,
                )
                return None
            except Exception:  # the client refused: trace without progress
                logger.exception("window/workDoneProgress/create failed")
                return None
        running = "running on fake tensors"
        waiting = self.traces.running is not job
        self.work_done_progress.begin(
            token,
            types.WorkDoneProgressBegin(
                title=title, cancellable=True, message="waiting for another trace to finish" if waiting else running
            ),
        )
        if waiting:
            job.on_start = lambda: self.work_done_progress.report(token, types.WorkDoneProgressReport(message=running))
        cancelled = self.work_done_progress.tokens.get(token)
        if cancelled is not None:
            cancelled.add_done_callback(
                lambda future: self.traces.cancel(job, "cancelled by the user") if future.cancelled() else None
            )
        return token

    def on_text_change(self, uri: str, shift: LineShift) -> None:
        """Move everything line-based along with one change; cancel traces of edited functions."""
        self.state(uri).shift(shift)
        for span in self._building:
            if span.uri == uri:
                span.follow(shift)
        for job in self.traces.jobs():
            if job.span is not None and job.span.uri == uri and job.span.follow(shift):
                self.traces.cancel(job, "the function was edited")


def _diagnostic_key(problem: Problem, lines: list[str], encoding: str) -> Optional[tuple[Any, ...]]:
    """What a lint finding's diagnostic depends on: the finding, and the text of its first and last
    lines (columns are counted in `encoding` units there). None for a trace's problem, and for a
    finding past the end of the text (clamped to the last line): those are converted each time."""
    finding = problem.finding
    if problem.trace is not None or finding is None or not 0 < finding.line <= finding.end_line <= len(lines):
        return None
    return (finding, encoding, lines[finding.line - 1], lines[finding.end_line - 1])


def create_server() -> AtenlensServer:
    from atenlens.lsp import handlers  # here: the handlers' type hints name AtenlensServer

    server = AtenlensServer()
    handlers.register(server)
    register_debug_requests(server)
    return server


def serve(args: argparse.Namespace, early: Optional[Early] = None) -> int:
    """Serves on stdio (or `--tcp`). `early`: what lsp/early.py read off stdin and answered
    before this module was imported; the server handles that input again, without answering twice."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    server = create_server()
    if getattr(args, "tcp", None):
        from atenlens.lsp.tcp import serve_tcp

        return serve_tcp(server, args.tcp)  # loopback only, a token, one client (lsp/tcp.py)
    from atenlens.lsp.stdio import serve_stdio

    read = b""
    if early is not None:
        server.adopt(early)
        read = early.read
    return serve_stdio(server, already_read=read)  # ends the process: 0 after shutdown + exit, 1 otherwise


def _ranks_request(settings: Any) -> dict[str, Any]:
    """The simulated ranks of the trace settings, as TraceRequest fields: none while trace.worldSize is 0,
    so that the function's `# atenlens-ranks:` comment decides, as in the CLI."""
    if not settings.world_size:
        return {}
    return {"world_size": settings.world_size, "rank": settings.rank, "gpus_per_node": settings.gpus_per_node}
