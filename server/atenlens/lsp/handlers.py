"""The language server's handlers: one per LSP method (named after it) or command, each glue: it asks
the server's document state, lint or traces for the answer, converts it with `convert.lsp_*` and
returns. `register` attaches them to an `AtenlensServer` (lsp/server.py)."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import TYPE_CHECKING, Any, Optional

from lsprotocol import types
from pygls.workspace import TextDocument

from atenlens.lint import lint_source
from atenlens.lint.fixes import fix_source, offered_fixes
from atenlens.lsp import convert
from atenlens.lsp.cost_export import CMD_EXPORT_MEMORY_TIMELINE, export_memory_timeline
from atenlens.lsp.documents import DocumentState
from atenlens.lsp.large import LARGE_DOCUMENT_CHARS, release_memory
from atenlens.lsp.lenses import (
    CMD_CANCEL_TRACE,
    CMD_INSERT_DIRECTIVE,
    CMD_TRACE,
    running_lenses,
    trace_lens,
    wants_lens,
)
from atenlens.lsp.server import AtenlensServer
from atenlens.lsp.settings import merge_problem_message
from atenlens.lsp.status import interpreter_facts
from atenlens.lsp.text import LineShift
from atenlens.report import Code
from atenlens.traceable import DIRECTIVE, FunctionInfo, directive_template, function_at

if TYPE_CHECKING:
    from atenlens.example_call import Proposal

# The hover and the example-call modules (and what they import: the listing renderer, the cost
# tables) are imported by the handlers that use them, on first use: the first diagnostics,
# which the editor waits for after starting the server, need none of them.

MAX_LENSED_FUNCTIONS = 20_000  # code lenses of one document: each costs its share of one response

CMD_RESTART_WORKER = "atenlens.restartWorker"
REQUEST_SERVER_INFO = "atenlens/serverInfo"


def lsp_shift(change: types.TextDocumentContentChangeEvent) -> LineShift:
    if isinstance(change, types.TextDocumentContentChangePartial):
        return LineShift.of_change(
            change.range.start.line, change.range.end.line, change.range.end.character, change.text
        )
    return LineShift.whole_text()


def initialize(ls: AtenlensServer, params: types.InitializeParams) -> None:
    _settings, problems, decided = ls.decide_tracing(params.initialization_options, "initializationOptions")
    ls.pending_settings_message = merge_problem_message(problems)
    ls.pending_trace_log = decided  # logged once the client is initialized


def initialized(ls: AtenlensServer, params: types.InitializedParams) -> None:
    ls.log(ls.pending_trace_log)
    if ls.pending_settings_message:
        ls.show(ls.pending_settings_message, types.MessageType.Warning)
        ls.pending_settings_message = None


async def shutdown(ls: AtenlensServer, params: None) -> None:
    await ls.traces.close()


def workspace_did_change_configuration(ls: AtenlensServer, params: types.DidChangeConfigurationParams) -> None:
    if params.settings or not ls.capability("workspace.configuration"):
        ls.reconfigure(params.settings, "workspace/didChangeConfiguration")
    else:  # the client sends no values (e.g. Neovim): ask for them
        asyncio.get_running_loop().create_task(ls.pull_configuration())


def did_open(ls: AtenlensServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.state(params.text_document.uri)
    if not ls.take_early_lint(params.text_document):
        ls.lints.schedule(params.text_document.uri)


def did_change(ls: AtenlensServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    if uri not in ls.documents:
        return
    for change in params.content_changes:
        ls.on_text_change(uri, lsp_shift(change))
    document, state = ls.document(uri), ls.state(uri)
    if document is not None and state.traces.functions:
        state.traces.revalidate(state.lines(document.source))
    ls.lints.changed(uri)


def did_save(ls: AtenlensServer, params: types.DidSaveTextDocumentParams) -> None:
    uri = params.text_document.uri
    if uri.endswith("/pyproject.toml"):  # its [tool.atenlens] may choose other rules now
        for open_uri in list(ls.documents):
            ls.lints.schedule(open_uri)
    document = ls.document(uri)
    if document is None or not (ls.settings.trace.enabled and ls.settings.trace.on_save):
        return
    functions = {f.qualname: f for f in ls.state(uri).functions(document.source)}
    for qualname in list(ls.state(uri).traces.functions):
        if qualname in functions:
            asyncio.get_running_loop().create_task(ls.run_trace(document, functions[qualname], "on save"))


def did_change_watched_files(ls: AtenlensServer, params: types.DidChangeWatchedFilesParams) -> None:
    """A pyproject.toml changed on disk, not saved in the editor (a `git checkout`, another tool):
    the open documents are linted again under it, as ruff's server does (the VS Code client
    watches `**/pyproject.toml`)."""
    if any(change.uri.endswith("/pyproject.toml") for change in params.changes):
        for open_uri in list(ls.documents):
            ls.lints.schedule(open_uri)


def did_close(ls: AtenlensServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    state = ls.documents.pop(uri, None)
    ls.lints.forget(uri)
    ls.traces.cancel_where(lambda job: job.key[0] == uri, "the document was closed")
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
    if state is not None and state.large:
        state = None  # the last reference to its lines and results
        release_memory()


async def code_action(ls: AtenlensServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    uri = params.text_document.uri
    document, state = ls.document(uri), ls.documents.get(uri)
    if document is None or state is None:
        return []
    only = params.context.only
    wants = lambda kind: not only or any(kind == k or kind.startswith(f"{k}.") for k in only)  # noqa: E731
    lint = state.lint
    actions: list[types.CodeAction] = []
    if lint is not None and lint.version == document.version:  # fixes of the text they were found in
        if wants(types.CodeActionKind.QuickFix):
            actions += lint_fix_actions(ls, uri, state, params)
        if wants(types.CodeActionKind.SourceFixAll) and offered_fixes(lint.findings):
            actions += await fix_all_actions(ls, uri, state)
    actions += directive_actions(ls, uri, state, params)
    return actions


def lint_fix_actions(
    ls: AtenlensServer, uri: str, state: DocumentState, params: types.CodeActionParams
) -> list[types.CodeAction]:
    """The fixes of the lint findings in the range (what `lint --fix` applies) and a `# noqa` for
    each of the client's diagnostics."""
    lint = state.lint
    assert lint is not None
    actions = []
    for finding, fix in offered_fixes(lint.findings, params.range.start.line, params.range.end.line):
        diagnostic = state.finding_diagnostics.get(finding)
        if diagnostic is None:
            continue  # not shown: a trace that ran the line found no such problem
        actions.append(convert.lsp_fix_action(uri, fix, diagnostic, lint.lines, ls.encoding))
    for diagnostic in params.context.diagnostics:
        if diagnostic.source in (convert.LINT_SOURCE, convert.TRACE_SOURCE) and diagnostic.code:
            action = convert.lsp_noqa_action(uri, diagnostic, lint.lines, ls.encoding)
            if action is not None:
                actions.append(action)
    return actions


async def fix_all_actions(ls: AtenlensServer, uri: str, state: DocumentState) -> list[types.CodeAction]:
    """One action applying every fix, as `lint --fix` would, while the document is unchanged."""
    document, lint = ls.document(uri), state.lint
    assert document is not None and lint is not None
    source, path = document.source, document.path
    codes, _ = await asyncio.to_thread(
        ls.lint_config.codes, path if uri.startswith("file:") else None, ls.settings.lint
    )
    fixed, count, _ = await asyncio.to_thread(fix_source, source, lambda text: lint_source(text, path, codes))
    now = ls.document(uri)
    if not count or now is None or now.version != lint.version:
        return []
    return [convert.lsp_fix_all_action(uri, fixed, lint.lines, ls.encoding)]


def directive_actions(
    ls: AtenlensServer, uri: str, state: DocumentState, params: types.CodeActionParams
) -> list[types.CodeAction]:
    """ "Add an example call", offered on the `def` line (or on a needs-inputs diagnostic), not all
    over the body."""
    document = ls.document(uri)
    assert document is not None
    first = params.range.start.line
    info = function_at(state.functions(document.source), first + 1)
    asked = info is not None and (
        info.first_line - 1 <= first <= info.line - 1
        or any(d.code == Code.NEEDS_INPUTS for d in params.context.diagnostics)
    )
    if info is None or not asked or not info.needs_args or info.directive is not None:
        return []
    edit, _ = directive_edit(ls, document, info)
    return [
        types.CodeAction(
            title=f"Add an atenlens example call for {info.qualname}", kind=types.CodeActionKind.QuickFix, edit=edit
        )
    ]


def directive_edit(
    ls: AtenlensServer, document: TextDocument, info: FunctionInfo
) -> tuple[types.WorkspaceEdit, Proposal]:
    """The edit inserting the proposed example call (example_call.py) above `info`: with its placeholders
    as tab stops where the client takes snippets in workspace edits, as plain text elsewhere."""
    from atenlens.example_call import Proposal, propose_call, snippet

    source = document.source
    try:
        if len(source) > LARGE_DOCUMENT_CHARS:
            raise SyntaxError("not parsed here")  # a large document is parsed elsewhere (lsp/large.py)
        proposal = propose_call(source, info)
    except (SyntaxError, ValueError, RecursionError):
        proposal = Proposal(directive_template(info).split("# atenlens: ", 1)[1], (), None)
    text = f"# atenlens: {proposal.expression}"
    tab_stops = None
    if ls.capability("workspace.workspace_edit.snippet_edit_support"):
        tab_stops = f"# atenlens: {snippet(proposal.expression, proposal.placeholders)}"
    lines = ls.state(document.uri).lines(source)
    return convert.lsp_directive_edit(
        document.uri, info, text, lines, ls.encoding, tab_stops, document.version
    ), proposal


def code_lens(ls: AtenlensServer, params: types.CodeLensParams) -> list[types.CodeLens]:
    uri = params.text_document.uri
    document, state = ls.document(uri), ls.documents.get(uri)
    if document is None or state is None:
        return []
    lines = state.lines(document.source)
    lenses: list[types.CodeLens] = []
    choice = ls.settings.lenses.functions
    now = asyncio.get_running_loop().time()
    for info in lensed_functions(ls, uri, state, document.source):
        traced = state.traces.functions.get(info.qualname)
        job = ls.traces.job_for((uri, info.qualname))
        offered = ls.settings.trace.enabled and wants_lens(info, choice)
        if not offered and traced is None and job is None:
            continue
        where = convert.lsp_function_range(info, lines, ls.encoding)
        shown = running_lenses(info, job.started, now) if job is not None else [trace_lens(info)] if offered else []
        for lens in shown:
            lenses.append(
                types.CodeLens(
                    range=where,
                    command=types.Command(
                        title=lens.title,
                        command=lens.command,
                        arguments=[{"uri": uri, "qualname": info.qualname}],
                        tooltip=lens.tooltip,
                    ),
                )
            )
        if traced is not None:
            lenses.append(
                types.CodeLens(
                    range=where, command=types.Command(title=traced.lens_title, command="", tooltip=traced.lens_tooltip)
                )
            )
    return lenses


def lensed_functions(ls: AtenlensServer, uri: str, state: DocumentState, source: str) -> list[FunctionInfo]:
    """The document's functions, the first MAX_LENSED_FUNCTIONS of them (logged once)."""
    functions = state.functions(source)
    if len(functions) > MAX_LENSED_FUNCTIONS:
        if not state.lens_cap_logged:
            state.lens_cap_logged = True
            ls.window_log_message(
                types.LogMessageParams(
                    type=types.MessageType.Info,
                    message=(
                        f"atenlens: {uri} has {len(functions):,} functions; code lenses are shown for the first "
                        f"{MAX_LENSED_FUNCTIONS:,} (the others can be traced by position)"
                    ),
                )
            )
        functions = functions[:MAX_LENSED_FUNCTIONS]
    return functions


def inlay_hint(ls: AtenlensServer, params: types.InlayHintParams) -> list[types.InlayHint]:
    uri = params.text_document.uri
    document, state = ls.document(uri), ls.documents.get(uri)
    if document is None or state is None or not ls.settings.hints.enabled:
        return []
    lines = ls.state(uri).lines(document.source)
    hints = state.traces.hints(ls.settings.hints, params.range.start.line, params.range.end.line)
    return [
        convert.lsp_inlay_hint(line, label, lines, ls.encoding, tooltip)
        for line, label, tooltip in hints
        if line < len(lines)
    ]


def hover(ls: AtenlensServer, params: types.HoverParams) -> Optional[types.Hover]:
    from atenlens.lsp.hover import hover_markdown
    from atenlens.lsp.hover_layout import PLAINTEXT, hover_layout, lay_out

    uri = params.text_document.uri
    document, state = ls.document(uri), ls.documents.get(uri)
    if document is None or state is None:
        return None
    owner = state.traces.line_owner(params.position.line)
    if owner is None:
        return None
    markdown = hover_markdown(
        owner.lines[params.position.line],
        show_bookkeeping=ls.settings.hints.show_bookkeeping,
        stale_note=owner.stale_note if owner.stale else None,
    )
    if not markdown:
        return None
    lines = ls.state(uri).lines(document.source)
    capabilities = ls.client_capabilities
    formats = getattr(getattr(capabilities.text_document, "hover", None), "content_format", None)
    parser = getattr(getattr(capabilities.general, "markdown", None), "parser", None)
    layout = hover_layout(formats, parser)  # tables, columns in code blocks, or plain text (hover_layout.py)
    kind = types.MarkupKind.PlainText if layout == PLAINTEXT else types.MarkupKind.Markdown
    return types.Hover(
        contents=types.MarkupContent(kind=kind, value=lay_out(markdown, layout)),
        range=convert.lsp_line_range(lines, params.position.line, ls.encoding),
    )


async def trace(ls: AtenlensServer, *arguments: Any) -> dict[str, Any]:
    document, info = ls.resolve_target(list(arguments))
    if not ls.settings.trace.enabled:
        message = (
            "atenlens: tracing is disabled (atenlens.trace.enabled is false, e.g. in an untrusted "
            "workspace): no code was run"
        )
        ls.show(message, types.MessageType.Warning)
        return {"status": "disabled", "qualname": info.qualname, "message": message}
    if info.directive_missing:
        # no code runs: the call would fail on the first name the module does not define
        message = (
            f"atenlens: the example call of {info.qualname} reads {', '.join(info.directive_missing)}, "
            "which the module does not define at its top level: fill them in (no code was run)"
        )
        ls.show(message, types.MessageType.Warning)
        return {"status": "needs-inputs", "qualname": info.qualname, "message": message}
    return await ls.run_trace(document, info)


async def cancel_trace(ls: AtenlensServer, *arguments: Any) -> dict[str, Any]:
    """Stop the trace of one function (`[{"uri", "qualname"}]`, the lens's arguments), or every trace."""
    jobs = ls.traces.jobs()
    if arguments:
        document, info = ls.resolve_target(list(arguments))
        jobs = [job for job in jobs if job.key == (document.uri, info.qualname)]
    for job in jobs:
        ls.traces.cancel(job, "cancelled by the user")
    return {"cancelled": len(jobs)}


async def insert_directive(ls: AtenlensServer, *arguments: Any) -> dict[str, Any]:
    document, info = ls.resolve_target(list(arguments))
    if info.directive is not None and info.directive_missing:
        return await fill_in_directive(ls, document, info)
    if info.directive is not None:
        return {"applied": False, "message": "the function already has a directive"}
    edit, proposal = directive_edit(ls, document, info)
    result = await ls.workspace_apply_edit_async(
        types.ApplyWorkspaceEditParams(edit=edit, label="atenlens: add an example call")
    )
    return {
        "applied": bool(result.applied),
        "directive": f"# atenlens: {proposal.expression}",
        "placeholders": list(proposal.placeholders),
    }


async def fill_in_directive(ls: AtenlensServer, document: TextDocument, info: FunctionInfo) -> dict[str, Any]:
    """The "Fill in the example call" lens: the directive's names the module does not define become the
    tab stops of a snippet that replaces the directive's call (a client that takes snippets in workspace
    edits), or the first of them is selected (`window/showDocument`), so the user types over them."""
    from atenlens.example_call import first_name_span, snippet

    assert info.directive is not None and info.directive_line is not None
    lines = ls.state(document.uri).lines(document.source)
    line = info.directive_line - 1
    match = DIRECTIVE.match(lines[line])
    assert match is not None  # functions.py found the directive on this line
    start, end = match.span("expr")
    answer: dict[str, Any] = {
        "directive": f"# atenlens: {info.directive}",
        "placeholders": list(info.directive_missing),
    }
    if ls.capability("workspace.workspace_edit.snippet_edit_support"):
        edit = convert.lsp_snippet_edit(
            document.uri,
            document.version,
            line,
            start,
            end,
            snippet(info.directive, info.directive_missing),
            lines,
            ls.encoding,
        )
        result = await ls.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(edit=edit, label="atenlens: fill in the example call")
        )
        return {"applied": bool(result.applied), **answer}
    if ls.capability("window.show_document.support"):
        first, last = first_name_span(info.directive, info.directive_missing)
        where = types.Range(
            start=convert.lsp_position(lines, line, start + first, ls.encoding),
            end=convert.lsp_position(lines, line, start + last, ls.encoding),
        )
        shown = await ls.window_show_document_async(
            types.ShowDocumentParams(uri=document.uri, take_focus=True, selection=where)
        )
        return {"applied": False, "selected": bool(shown.success), **answer}
    return {"applied": False, "message": f"fill in {', '.join(info.directive_missing)} on line {line + 1}", **answer}


async def restart_worker(ls: AtenlensServer, *arguments: Any) -> dict[str, Any]:
    await ls.traces.restart()
    return {"restarted": True}


def server_info(ls: AtenlensServer, params: Any) -> dict[str, Any]:
    return {
        "name": ls.name,
        "version": ls.version,
        "pid": os.getpid(),
        "torchImported": "torch" in sys.modules,
        "workerStarts": ls.traces.worker_starts,
        "openDocuments": len(ls.documents),
        "positionEncoding": ls.encoding,
        "modulesAtFirstDiagnostics": ls.modules_at_first_diagnostics,
        "lintsStarted": [{"uri": uri, "count": count} for uri, count in ls.lints.started.items()],
        **interpreter_facts(),
    }


def register(server: AtenlensServer) -> None:
    server.feature(types.INITIALIZE)(initialize)
    server.feature(types.INITIALIZED)(initialized)
    server.feature(types.SHUTDOWN)(shutdown)
    server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(workspace_did_change_configuration)
    server.feature(types.TEXT_DOCUMENT_DID_OPEN)(did_open)
    server.feature(types.TEXT_DOCUMENT_DID_CHANGE)(did_change)
    server.feature(types.TEXT_DOCUMENT_DID_SAVE)(did_save)
    server.feature(types.TEXT_DOCUMENT_DID_CLOSE)(did_close)
    server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)(did_change_watched_files)
    server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll]),
    )(code_action)
    server.feature(types.TEXT_DOCUMENT_CODE_LENS)(code_lens)
    server.feature(types.TEXT_DOCUMENT_INLAY_HINT)(inlay_hint)
    server.feature(types.TEXT_DOCUMENT_HOVER)(hover)
    server.command(CMD_TRACE)(trace)
    server.command(CMD_INSERT_DIRECTIVE)(insert_directive)
    server.command(CMD_CANCEL_TRACE)(cancel_trace)
    server.command(CMD_RESTART_WORKER)(restart_worker)
    server.command(CMD_EXPORT_MEMORY_TIMELINE)(export_memory_timeline)
    server.feature(REQUEST_SERVER_INFO)(server_info)
