"""`atenlens serve`: the language server. Handlers are named after the LSP method they answer
and are glue: the analysis lives in lint/, functions.py, trace_view.py, labels.py, hover.py,
the conversion in convert.py, the tracing in tracing.py (through the worker process).

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
import sys
from typing import Any, Optional

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from atenlens import __version__
from atenlens.functions import FunctionInfo, directive_template, function_at
from atenlens.lint import RULES, lint_source
from atenlens.lint.fixes import fix_source, offered_fixes
from atenlens.lsp import convert
from atenlens.lsp.debug import register_debug_requests
from atenlens.lsp.documents import DocumentState, LintResult
from atenlens.lsp.hover import hover_markdown
from atenlens.lsp.lenses import CMD_INSERT_DIRECTIVE, CMD_TRACE, trace_lens, wants_lens
from atenlens.lsp.large import LARGE_DOCUMENT_CHARS, analyze_elsewhere, release_memory
from atenlens.lsp.lint_config import WorkspaceLintConfig
from atenlens.lsp.problems import document_problems
from atenlens.lsp.protocol import WORK_DONE_TOKEN, AtenlensProtocol
from atenlens.lsp.settings import Settings, merge_problem_message, settings_from_json, trace_switch
from atenlens.lsp.status import FILE_STATUS, file_status, interpreter_facts, wants_file_status
from atenlens.lsp.text import UTF16, LineShift
from atenlens.lsp.trace_view import build_traced_function
from atenlens.lsp.tracing import TraceJob, TraceQueue
from atenlens.report import Code, TraceRequest

logger = logging.getLogger(__name__)

NAME = "atenlens"
VERSION = __version__
LINT_DEBOUNCE_SECONDS = 0.03      # coalesces a burst of changes; lints only the latest version
MAX_LENSED_FUNCTIONS = 20_000    # code lenses of one document: each costs its share of one response
PROGRESS_CREATE_SECONDS = 2.0     # how long a trace waits for the client to accept its progress token

CMD_RESTART_WORKER = "atenlens.restartWorker"
REQUEST_SERVER_INFO = "atenlens/serverInfo"


class AtenlensServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(NAME, VERSION, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         protocol_cls=AtenlensProtocol)
        self.settings = Settings()
        self.pending_settings_message: Optional[str] = None
        self.trace_decided_by = "no source has given trace.enabled yet"   # for the log: what decided tracing
        self.pending_trace_log = ""
        self.documents: dict[str, DocumentState] = {}
        self.lint_config = WorkspaceLintConfig(tuple(rule.code for rule in RULES))
        self.traces = TraceQueue(self._make_worker)
        self._progress_ids = itertools.count(1)
        self._building: list[dict[str, Any]] = []   # metas of finished traces whose views are being built

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
        from atenlens.worker.client import TraceWorker   # torch-free; imported only when tracing

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
            self.schedule_lint(uri, 0)
        self.refresh_views()

    async def pull_configuration(self) -> None:
        source = "workspace/configuration"
        try:
            answer = await self.workspace_configuration_async(types.ConfigurationParams(
                items=[types.ConfigurationItem(section="atenlens")]))
        except Exception as error:     # an error, or an answer that is not a list: no values
            logger.warning("workspace/configuration failed: %r", error)
            answer, source = None, "workspace/configuration (an error or an answer that is not a list)"
        self.reconfigure(answer[0] if answer else None, source)

    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    # --- lint + diagnostics -----------------------------------------------------------------

    def schedule_lint(self, uri: str, delay: float) -> None:
        """Lint `uri` after `delay`. A lint still waiting is superseded; a lint already running in
        its thread finishes (a thread cannot be interrupted) and the new one waits for it, so at
        most one lint per document runs and at most one waits."""
        state = self.state(uri)
        if state.lint_task is not None and not state.lint_task.done() and state.lint_task is not state.lint_running:
            state.lint_task.cancel()
        state.lint_task = asyncio.get_running_loop().create_task(self._lint_later(uri, delay))

    async def _lint_later(self, uri: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)   # debounce: a newer change cancels this task
        state = self.documents.get(uri)
        if state is None:
            return                       # closed meanwhile
        while state.lint_running is not None:
            await asyncio.wait([state.lint_running])
        state.lint_running = asyncio.current_task()
        try:
            await self._lint_now(uri)
        finally:
            state.lint_running = None

    async def _lint_now(self, uri: str) -> None:
        document = self.document(uri)
        if document is None:
            return
        version, source = document.version, document.source
        lint = self.settings.lint
        findings = []
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
        if large:                        # parsed elsewhere, functions too (lsp/large.py)
            analysis = await analyze_elsewhere(source, document.path, codes, None, lint.enabled)
            if analysis.failure is not None:
                logger.warning("atenlens: %s: %s", uri, analysis.failure)
            findings = analysis.findings
        current = self.document(uri)
        if current is None or current.version != version:
            return                       # a newer version is on its way to being linted
        state = self.documents[uri]
        state.lint = LintResult(version=version, lines=state.lines(source), findings=findings)
        self.publish(uri)
        if analysis is not None and analysis.failure is None and state.found_functions(source, analysis.functions):
            self.refresh_views()         # its code lenses were those of the previous analysis

    def _lint_document(self, source: str, key: str, path: Optional[str]) -> tuple[list, Optional[str]]:
        """(findings, a message for the user): the rules that `[tool.atenlens]` and the editor's
        settings choose for `path` (runs in a thread: it reads the pyproject.toml)."""
        codes, problem = self.lint_config.codes(path, self.settings.lint)
        return lint_source(source, key, codes), problem

    def publish(self, uri: str) -> None:
        state, document = self.documents.get(uri), self.document(uri)
        if state is None or document is None or state.lint is None:
            return
        if document.version != state.lint.version:
            return      # a lint of the newer text is scheduled; it publishes both kinds, in step
        lines = state.lint.lines
        diagnostics = []
        state.finding_diagnostics = {}     # the published diagnostic of each lint finding (for its fix)
        for problem in document_problems(state.lint.findings, state.traces, lines):
            diagnostic = convert.lsp_problem_diagnostic(problem, lines, self.encoding)
            if problem.finding is not None:
                state.finding_diagnostics[problem.finding] = diagnostic
            diagnostics.append(diagnostic)
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=uri, version=state.lint.version, diagnostics=diagnostics))
        self.send_file_status(uri, state, diagnostics)

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
            raise JsonRpcInvalidParams(message='expected [{"uri": ..., "qualname": ...}] or '
                                               '[{"uri": ..., "position": {"line": ..., "character": ...}}]')
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
            raise JsonRpcInvalidParams(message="no traceable function there"
                                       + (f" named {argument['qualname']!r}" if "qualname" in argument else ""))
        return document, info

    async def run_trace(self, document: TextDocument, info: FunctionInfo) -> dict[str, Any]:
        uri, source = document.uri, document.source
        settings = self.settings.trace
        request = TraceRequest(file=document.path, qualname=info.qualname, device=settings.device,  # type: ignore[arg-type]
                               timeout_seconds=settings.timeout_seconds, source=source, gpu=settings.gpu,
                               **_ranks_request(settings))
        first = (info.directive_line or info.first_line) - 1
        meta: dict[str, Any] = {"uri": uri, "first": first, "last": info.end_line - 1, "def_line": info.line - 1,
                                "shifts": [], "lines": self.state(uri).lines(source)}
        job = self.traces.submit((uri, info.qualname), request, meta)
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
                self.work_done_progress.end(token, types.WorkDoneProgressEnd(
                    message=job.reason or "done"))
                self.work_done_progress.tokens.pop(token, None)
        if outcome.cancelled:
            return {"status": "cancelled", "qualname": info.qualname, "message": outcome.reason}
        if outcome.report is None:
            self.show(f"atenlens: the trace of {info.qualname} failed: {outcome.error}", types.MessageType.Error)
            return {"status": "error", "qualname": info.qualname, "message": outcome.error or ""}
        if self.document(uri) is None:
            return {"status": "closed", "qualname": info.qualname, "message": "the document was closed"}
        # in a thread: sorting up to MAX_EVENTS events onto lines must not hold up other requests
        # (edits meanwhile are recorded in meta["shifts"] by on_text_change, as while it ran)
        self._building.append(meta)
        try:
            traced = await asyncio.to_thread(build_traced_function, outcome.report, document.path, meta["lines"],
                                             info.qualname, meta["first"], meta["last"], meta["def_line"])
        finally:
            self._building.remove(meta)
        if self.document(uri) is None:
            return {"status": "closed", "qualname": info.qualname, "message": "the document was closed"}
        for shift in meta["shifts"]:
            traced.shift(shift)
        current = self.document(uri)
        assert current is not None
        traced.revalidate(self.state(uri).lines(current.source))
        for note in outcome.report.notes:
            self.window_log_message(types.LogMessageParams(
                type=types.MessageType.Info, message=f"atenlens: trace of {info.qualname}: {note}"))
        state = self.state(uri)
        state.traces.put(traced)
        self.publish(uri)
        self.refresh_views()
        return {"status": outcome.report.status, "qualname": info.qualname, "summary": traced.summary,
                "message": outcome.report.message}

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
                logger.warning("window/workDoneProgress/create was not answered within %g s: tracing without "
                               "progress", PROGRESS_CREATE_SECONDS)
                return None
            except Exception:               # the client refused: trace without progress
                logger.exception("window/workDoneProgress/create failed")
                return None
        running = "running on fake tensors"
        waiting = self.traces.running is not job
        self.work_done_progress.begin(token, types.WorkDoneProgressBegin(
            title=title, cancellable=True, message="waiting for another trace to finish" if waiting else running))
        if waiting:
            job.meta["on_start"] = lambda: self.work_done_progress.report(
                token, types.WorkDoneProgressReport(message=running))
        cancelled = self.work_done_progress.tokens.get(token)
        if cancelled is not None:
            cancelled.add_done_callback(
                lambda future: self.traces.cancel(job, "cancelled by the user") if future.cancelled() else None)
        return token

    def on_text_change(self, uri: str, shift: LineShift) -> None:
        """Move everything line-based along with one change; cancel traces of edited functions."""
        self.state(uri).shift(shift)
        for meta in self._building:
            if meta["uri"] == uri:
                meta["shifts"].append(shift)
        for job in self.traces.jobs():
            if job.key[0] != uri:
                continue
            meta = job.meta
            meta["shifts"].append(shift)
            if shift.touches(meta["first"], meta["last"]):
                self.traces.cancel(job, "the function was edited")
            for name in ("first", "last"):
                moved = shift.map(meta[name])
                meta[name] = moved if moved is not None else shift.start


def lsp_shift(change: types.TextDocumentContentChangeEvent) -> LineShift:
    if isinstance(change, types.TextDocumentContentChangePartial):
        return LineShift.of_change(change.range.start.line, change.range.end.line,
                                   change.range.end.character, change.text)
    return LineShift.whole_text()


def create_server() -> AtenlensServer:
    server = AtenlensServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: AtenlensServer, params: types.InitializeParams) -> None:
        _settings, problems, decided = ls.decide_tracing(params.initialization_options, "initializationOptions")
        ls.pending_settings_message = merge_problem_message(problems)
        ls.pending_trace_log = decided       # logged once the client is initialized

    @server.feature(types.INITIALIZED)
    def initialized(ls: AtenlensServer, params: types.InitializedParams) -> None:
        ls.log(ls.pending_trace_log)
        if ls.pending_settings_message:
            ls.show(ls.pending_settings_message, types.MessageType.Warning)
            ls.pending_settings_message = None

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: AtenlensServer, params: None) -> None:
        await ls.traces.close()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def workspace_did_change_configuration(ls: AtenlensServer, params: types.DidChangeConfigurationParams) -> None:
        if params.settings or not ls.capability("workspace.configuration"):
            ls.reconfigure(params.settings, "workspace/didChangeConfiguration")
        else:   # the client sends no values (e.g. Neovim): ask for them
            asyncio.get_running_loop().create_task(ls.pull_configuration())

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: AtenlensServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.state(params.text_document.uri)
        ls.schedule_lint(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: AtenlensServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        if uri not in ls.documents:
            return
        for change in params.content_changes:
            ls.on_text_change(uri, lsp_shift(change))
        document, state = ls.document(uri), ls.state(uri)
        if document is not None and state.traces.functions:
            state.traces.revalidate(state.lines(document.source))
        # A change after a pause (typing) is linted at once; changes that follow each other
        # within the debounce (a paste, a replace-all, an editor replaying edits) are coalesced.
        now = asyncio.get_running_loop().time()
        in_burst = now - state.last_change < LINT_DEBOUNCE_SECONDS
        state.last_change = now
        ls.schedule_lint(uri, LINT_DEBOUNCE_SECONDS if in_burst else 0)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: AtenlensServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        if uri.endswith("/pyproject.toml"):      # its [tool.atenlens] may choose other rules now
            for open_uri in list(ls.documents):
                ls.schedule_lint(open_uri, 0)
        document = ls.document(uri)
        if document is None or not (ls.settings.trace.enabled and ls.settings.trace.on_save):
            return
        functions = {f.qualname: f for f in ls.state(uri).functions(document.source)}
        for qualname in list(ls.state(uri).traces.functions):
            if qualname in functions:
                asyncio.get_running_loop().create_task(ls.run_trace(document, functions[qualname]))

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: AtenlensServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        state = ls.documents.pop(uri, None)
        if state is not None and state.lint_task is not None:
            state.lint_task.cancel()
        ls.traces.cancel_where(lambda job: job.key[0] == uri, "the document was closed")
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        if state is not None and state.large:
            state = None                 # the last reference to its lines and results
            release_memory()

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll]))
    async def code_action(ls: AtenlensServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        document, state = ls.document(uri), ls.documents.get(uri)
        if document is None or state is None:
            return []
        actions: list[types.CodeAction] = []
        lint = state.lint
        first, last = params.range.start.line, params.range.end.line
        only = params.context.only
        wants = lambda kind: not only or any(kind == k or kind.startswith(f"{k}.") for k in only)  # noqa: E731
        current = lint is not None and lint.version == document.version
        if current and wants(types.CodeActionKind.QuickFix):
            for finding, fix in offered_fixes(lint.findings, first, last):   # what `lint --fix` applies
                diagnostic = state.finding_diagnostics.get(finding)
                if diagnostic is None:
                    continue      # not shown: a trace that ran the line found no such problem
                actions.append(convert.lsp_fix_action(uri, fix, diagnostic, lint.lines, ls.encoding))
            for diagnostic in params.context.diagnostics:
                if diagnostic.source in (convert.LINT_SOURCE, convert.TRACE_SOURCE) and diagnostic.code:
                    action = convert.lsp_noqa_action(uri, diagnostic, lint.lines, ls.encoding)
                    if action is not None:
                        actions.append(action)
        if current and wants(types.CodeActionKind.SourceFixAll) and offered_fixes(lint.findings):
            source, path = document.source, document.path
            codes, _ = await asyncio.to_thread(ls.lint_config.codes, path if uri.startswith("file:") else None,
                                               ls.settings.lint)
            fixed, count, _ = await asyncio.to_thread(fix_source, source, lambda text: lint_source(text, path, codes))
            if count and ls.document(uri) is not None and ls.document(uri).version == lint.version:
                actions.append(convert.lsp_fix_all_action(uri, fixed, lint.lines, ls.encoding))
        # Offered on the `def` line (or on a needs-inputs diagnostic), not all over the body.
        info = function_at(state.functions(document.source), first + 1)
        asked = info is not None and (info.first_line - 1 <= first <= info.line - 1 or any(
            d.code == Code.NEEDS_INPUTS for d in params.context.diagnostics))
        if info is not None and asked and info.needs_args and info.directive is None:
            lines = ls.state(uri).lines(document.source)
            actions.append(types.CodeAction(
                title=f"Add an atenlens example call for {info.qualname}", kind=types.CodeActionKind.QuickFix,
                edit=convert.lsp_directive_edit(uri, info, directive_template(info), lines, ls.encoding)))
        return actions

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    def code_lens(ls: AtenlensServer, params: types.CodeLensParams) -> list[types.CodeLens]:
        uri = params.text_document.uri
        document, state = ls.document(uri), ls.documents.get(uri)
        if document is None or state is None:
            return []
        lines = ls.state(uri).lines(document.source)
        lenses: list[types.CodeLens] = []
        functions = state.functions(document.source)
        if len(functions) > MAX_LENSED_FUNCTIONS:
            if not state.lens_cap_logged:
                state.lens_cap_logged = True
                ls.window_log_message(types.LogMessageParams(type=types.MessageType.Info, message=(
                    f"atenlens: {uri} has {len(functions):,} functions; code lenses are shown for the first "
                    f"{MAX_LENSED_FUNCTIONS:,} (the others can be traced by position)")))
            functions = functions[:MAX_LENSED_FUNCTIONS]
        choice = ls.settings.lenses.functions
        for info in functions:
            traced = state.traces.functions.get(info.qualname)
            offered = ls.settings.trace.enabled and wants_lens(info, choice)
            if not offered and traced is None:
                continue
            where = convert.lsp_function_range(info, lines, ls.encoding)
            if offered:
                lens = trace_lens(info)
                lenses.append(types.CodeLens(range=where, command=types.Command(
                    title=lens.title, command=lens.command, arguments=[{"uri": uri, "qualname": info.qualname}])))
            if traced is not None:
                lenses.append(types.CodeLens(range=where, command=types.Command(
                    title=traced.lens_title, command="", tooltip=traced.lens_tooltip)))
        return lenses

    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT)
    def inlay_hint(ls: AtenlensServer, params: types.InlayHintParams) -> list[types.InlayHint]:
        uri = params.text_document.uri
        document, state = ls.document(uri), ls.documents.get(uri)
        if document is None or state is None or not ls.settings.hints.enabled:
            return []
        lines = ls.state(uri).lines(document.source)
        hints = state.traces.hints(ls.settings.hints, params.range.start.line, params.range.end.line)
        return [convert.lsp_inlay_hint(line, label, lines, ls.encoding, tooltip)
                for line, label, tooltip in hints if line < len(lines)]

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: AtenlensServer, params: types.HoverParams) -> Optional[types.Hover]:
        uri = params.text_document.uri
        document, state = ls.document(uri), ls.documents.get(uri)
        if document is None or state is None:
            return None
        owner = state.traces.line_owner(params.position.line)
        if owner is None:
            return None
        markdown = hover_markdown(owner.lines[params.position.line], show_bookkeeping=ls.settings.hints.show_bookkeeping,
                                  stale_note=owner.stale_note if owner.stale else None)
        if not markdown:
            return None
        lines = ls.state(uri).lines(document.source)
        formats = getattr(getattr(ls.client_capabilities.text_document, "hover", None), "content_format", None)
        kind = (types.MarkupKind.Markdown if not formats or types.MarkupKind.Markdown in formats
                else types.MarkupKind.PlainText)   # the markdown source reads fine as plain text
        return types.Hover(contents=types.MarkupContent(kind=kind, value=markdown),
                           range=convert.lsp_line_range(lines, params.position.line, ls.encoding))

    @server.command(CMD_TRACE)
    async def trace(ls: AtenlensServer, *arguments: Any) -> dict[str, Any]:
        document, info = ls.resolve_target(list(arguments))
        if not ls.settings.trace.enabled:
            message = ("atenlens: tracing is disabled (atenlens.trace.enabled is false, e.g. in an untrusted "
                       "workspace): no code was run")
            ls.show(message, types.MessageType.Warning)
            return {"status": "disabled", "qualname": info.qualname, "message": message}
        return await ls.run_trace(document, info)

    @server.command(CMD_INSERT_DIRECTIVE)
    async def insert_directive(ls: AtenlensServer, *arguments: Any) -> dict[str, Any]:
        document, info = ls.resolve_target(list(arguments))
        if info.directive is not None:
            return {"applied": False, "message": "the function already has a directive"}
        lines = ls.state(document.uri).lines(document.source)
        edit = convert.lsp_directive_edit(document.uri, info, directive_template(info), lines, ls.encoding)
        result = await ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(
            edit=edit, label="atenlens: add an example call"))
        return {"applied": bool(result.applied)}

    @server.command(CMD_RESTART_WORKER)
    async def restart_worker(ls: AtenlensServer, *arguments: Any) -> dict[str, Any]:
        await ls.traces.restart()
        return {"restarted": True}

    @server.feature(REQUEST_SERVER_INFO)
    def server_info(ls: AtenlensServer, params: Any) -> dict[str, Any]:
        return {"name": NAME, "version": VERSION, "pid": os.getpid(),
                "torchImported": "torch" in sys.modules, "workerStarts": ls.traces.worker_starts,
                "openDocuments": len(ls.documents),
                "positionEncoding": ls.encoding, **interpreter_facts()}

    register_debug_requests(server)
    return server


def serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    server = create_server()
    if getattr(args, "tcp", None):
        from atenlens.lsp.tcp import serve_tcp

        return serve_tcp(server, args.tcp)   # loopback only, a token, one client (lsp/tcp.py)
    else:
        from atenlens.lsp.stdio import serve_stdio

        return serve_stdio(server)      # ends the process: 0 after shutdown + exit, 1 otherwise
    return 0


def _ranks_request(settings: Any) -> dict[str, Any]:
    """The simulated ranks of the trace settings, as TraceRequest fields: none while trace.worldSize is 0,
    so that the function's `# atenlens-ranks:` comment decides, as in the CLI."""
    if not settings.world_size:
        return {}
    return {"world_size": settings.world_size, "rank": settings.rank, "gpus_per_node": settings.gpus_per_node}
