"""The server's JSON-RPC protocol: pygls's, plus an answer for requests it cannot read.

pygls 2.1 converts each incoming message to its lsprotocol type while parsing it; when a
request's params do not fit (`textDocument/hover` without a position, a uri that is a number)
it logs the error and drops the message, so the client waits for an answer that never comes.
The specification wants a response to every request: here such a request is answered with
InvalidParams (-32602) naming the method, and the server goes on serving.

pygls 2.1 also keeps the future of every notification whose handler is a generator (its own
didOpen/didChange/didClose), a coroutine or a thread under a fresh uuid in `_request_futures`,
and only requests are ever removed from it: each keystroke leaked about 2 KB, for as long as the
server lives. Here a notification's future is dropped once its handler has finished.

pygls 2.1 splits a document into lines with `str.splitlines()`, which also breaks at \x0b, \x0c
(a form feed, found in real Python files), \x1c-\x1e, \x85, \u2028 and \u2029; LSP clients
count only \n, \r\n and \r. After such a character every incremental change landed on the wrong
line and the server's text silently differed from the editor's. The documents here count lines
as LSP does, and apply an incremental change by splicing it in at its offsets (pygls re-split and
copied the whole document for every change).

pygls 2.1 passes a command handler only the command's arguments; the `workDoneToken` a client
sends with `workspace/executeCommand` (VS Code always sends one) is lost, so the server could only
report progress under a token of its own, which VS Code shows apart from the command. Here the
token is put in WORK_DONE_TOKEN for the command's handler (a context variable: each handler runs
in its own task, so concurrent commands each see their own). And a `$/cancelRequest` for a command
only cancelled the future its answer comes from, not the task running the command (a trace ran on
to its hard timeout); here the command's task is cancelled with it.

Messages reach the protocol through `dispatch_json` (lsp/stdio.py reads the frames), which
enforces what pygls did not: a request's id is an integer or a string (else InvalidRequest with a
null id); a notification method sent with an id is refused with InvalidRequest (pygls ran it as a
notification, and the sender waited forever); a request before `initialize` gets
ServerNotInitialized (-32002) instead of an InternalError with a traceback; a request after
`shutdown` gets InvalidRequest (pygls never answered). A didChange whose range ends before it
starts is refused whole (pygls dropped the change and still took the new version).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
from concurrent.futures import Future
from typing import Any, Callable, Optional, Sequence

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcServerNotInitialized
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method
from pygls.workspace import TextDocument, Workspace

from atenlens.lines import lines_with_ends
from atenlens.lsp.early import Early, publish_frame

logger = logging.getLogger(__name__)

# The workDoneToken of the `workspace/executeCommand` request whose handler is running, if any.
WORK_DONE_TOKEN: contextvars.ContextVar[Optional[types.ProgressToken]] = contextvars.ContextVar(
    "atenlens_work_done_token", default=None
)


def lsp_lines(text: str) -> tuple[str, ...]:
    """`text.splitlines(keepends=True)`, but breaking only at \\n, \\r\\n and \\r (atenlens/lines.py)."""
    return lines_with_ends(text)


class LspTextDocument(TextDocument):
    _lines_of: Optional[str] = None
    _lines: tuple[str, ...] = ()

    @property
    def lines(self) -> Sequence[str]:
        return self._current_lines()

    def _current_lines(self) -> tuple[str, ...]:
        source = self.source
        if source is not self._lines_of:  # kept while the text is the same (pygls asks often)
            self._lines, self._lines_of = lsp_lines(source), source
        return self._lines

    def _apply_incremental_change(self, change: types.TextDocumentContentChangePartial) -> None:
        """pygls's result, text for text, without its cost: pygls re-splits the whole document and
        copies it line by line for every change (16 ms a keystroke in a 5,000-line file, so 50
        changes in a burst took 0.8 s before the first lint could start). Here the text is spliced
        at the change's offsets and only the lines around it are split again."""
        lines = self._current_lines()
        if not lines:
            super()._apply_incremental_change(change)
            return
        span = self._position_codec.range_from_client_units(lines, change.range)
        first, last = span.start.line, span.end.line
        start = sum(map(len, lines[:first]))
        end = start + sum(map(len, lines[first:last]))
        before, after = lines[first][: span.start.character], lines[last][span.end.character :]
        source = self.source
        new = source[:start] + before + change.text + after + source[end + len(lines[last]) :]
        # The lines next to the change are split again with it: a line end may join one there
        # ("\r" typed before a "\n"); the lines beyond those keep their ends.
        low, high = max(first - 1, 0), min(last + 2, len(lines))
        middle = "".join(lines[low:first]) + before + change.text + after + "".join(lines[last + 1 : high])
        self._source = new
        self._lines, self._lines_of = lines[:low] + lsp_lines(middle) + lines[high:], new


class LspWorkspace(Workspace):
    def _create_text_document(
        self,
        doc_uri: str,
        source: Optional[str] = None,
        version: Optional[int] = None,
        language_id: Optional[str] = None,
    ) -> TextDocument:
        return LspTextDocument(
            doc_uri,
            source=source,
            version=version,
            language_id=language_id,
            sync_kind=self._sync_kind,
            position_codec=self._position_codec,
        )


class _Answered:
    """Stands in for a request that was already answered with an error while parsing."""

    jsonrpc = ""


ANSWERED = _Answered()


def _is_notification(method: str) -> bool:
    known = types.METHOD_TO_TYPES.get(method)
    return known is not None and known[0].__name__.endswith("Notification")


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


class AtenlensProtocol(LanguageServerProtocol):
    # Set by the stdio transport (lsp/stdio.py): called at `exit`, which then ends the process there.
    on_exit: Optional[Callable[[], None]] = None
    # What lsp/early.py answered and published before the server started (set by `serve`).
    early: Optional[Early] = None
    _initialize_seen = False

    @property
    def shutdown_received(self) -> bool:
        return bool(self._shutdown)

    def protocol_error(self, text: str) -> None:
        """A frame or message that could not be read: said in the log (stderr and window/logMessage)."""
        logger.error("atenlens: protocol error: %s", text)
        try:
            self.notify(
                types.WINDOW_LOG_MESSAGE,
                types.LogMessageParams(type=types.MessageType.Error, message=f"atenlens: protocol error: {text}"),
            )
        except Exception:  # noqa: BLE001 - the log on stderr is enough
            pass

    def dispatch_json(self, data: Any) -> None:
        """One message as parsed from a frame (only the top-level object is a message: objects
        nested in its params are plain data, whatever their shape). Enforces what pygls does not:
        an id is an integer or a string; a notification carries no id; requests before
        `initialize` get ServerNotInitialized (-32002) and requests after `shutdown` get
        InvalidRequest (-32600), without running anything."""
        if not isinstance(data, dict):
            self.protocol_error(f"a message that is not a JSON object ({type(data).__name__}); ignored")
            return
        method = data.get("method")
        if "id" in data and not _valid_id(data["id"]):
            if isinstance(method, str):
                self._refuse(
                    None, JsonRpcInvalidRequest(message=f"{method}: a request's id must be an integer or a string")
                )
            else:
                self.protocol_error(f"a response whose id is not an integer or a string: {data['id']!r}; ignored")
            return
        if isinstance(method, str) and "id" in data:
            if _is_notification(method):
                self._refuse(
                    data["id"],
                    JsonRpcInvalidRequest(
                        message=f"{method} is a notification; it was sent with an id and was not handled"
                    ),
                )
                return
            if method != types.INITIALIZE and not self._initialize_seen:
                self._refuse(
                    data["id"], JsonRpcServerNotInitialized(message=f"{method}: the server has not been initialized")
                )
                return
            if self._shutdown:
                self._refuse(
                    data["id"],
                    JsonRpcInvalidRequest(message=f"{method}: the server has been shut down; only `exit` is accepted"),
                )
                return
            if method == types.INITIALIZE:
                self._initialize_seen = True
        elif isinstance(method, str) and method != types.EXIT and (self._shutdown or not self._initialize_seen):
            logger.warning(
                "ignoring the notification %s %s", method, "after shutdown" if self._shutdown else "before initialize"
            )
            return
        try:
            message = self.structure_message(data)
            self.handle_message(message)
        except Exception:  # noqa: BLE001 - one message never ends the server
            logger.exception("unable to handle a message")

    def _refuse(self, msg_id: Any, error: JsonRpcException) -> None:
        self._send_response(msg_id, None, error.to_response_error())

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> Any:
        """pygls's, but a change whose range ends before it starts is refused as a whole (pygls
        dropped that change and still took the new version): nothing is applied, the version
        stays, and the log says the server's text may now differ from the editor's."""
        for change in params.content_changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                start, end = change.range.start, change.range.end
                if (end.line, end.character) < (start.line, start.character):
                    self.protocol_error(
                        f"textDocument/didChange of {params.text_document.uri} (version "
                        f"{params.text_document.version}) has a range that ends ({end.line}:{end.character}) "
                        f"before it starts ({start.line}:{start.character}); the change was not applied, and "
                        "the server's text may differ from the editor's until the document is reopened"
                    )
                    return None
        return (yield from super().lsp_text_document__did_change(params))

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> Any:
        if self.on_exit is None:  # not on the stdio transport: pygls's own exit
            return (yield from super().lsp_exit(*args))
        self.on_exit()
        return None

    # pygls creates its Workspace inside its own `initialize` handler; it becomes an LspWorkspace
    # as it is stored (the subclass only overrides a method, so the object is unchanged otherwise).
    @property
    def _workspace(self) -> Optional[Workspace]:
        return self.__dict__.get("_lsp_workspace")

    @_workspace.setter
    def _workspace(self, workspace: Optional[Workspace]) -> None:
        if type(workspace) is Workspace:
            workspace.__class__ = LspWorkspace
        self.__dict__["_lsp_workspace"] = workspace

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            if "id" in data and "method" not in data:
                # an answer of the wrong shape (workspace/configuration answered with null): the
                # request that waits for it fails, rather than waiting for ever
                future = self._request_futures.pop(data["id"], None)
                if future is not None and not future.done():
                    future.set_exception(error)
                return ANSWERED
            if not ("id" in data and isinstance(data.get("method"), str)):
                raise  # a notification: nobody waits for an answer
            if isinstance(error, JsonRpcInvalidParams):
                error = JsonRpcInvalidParams(message=f"Invalid params for {data['method']}")
            self._send_response(data["id"], None, error.to_response_error())
            return ANSWERED

    def _execute_handler(
        self,
        msg_id: Any,
        handler: Callable[..., Any],
        callback: Callable[[Future], Any],
        args: Optional[tuple[Any, ...]] = None,
        kwargs: Optional[dict[str, Any]] = None,
    ) -> None:
        if getattr(callback, "__func__", None) is LanguageServerProtocol._check_handler_result:
            check_result = callback  # a notification: nobody will ever look its future up

            def callback(future: Future, msg_id: Any = msg_id) -> None:
                self._request_futures.pop(msg_id, None)
                check_result(future)

        super()._execute_handler(msg_id, handler, callback, args, kwargs)

    def handle_message(self, message: Any) -> None:
        if message is ANSWERED:
            return
        super().handle_message(message)

    def json_of(self, value: Any) -> str:
        """`value` (an lsprotocol object) as the JSON text pygls would send for it."""
        return json.dumps(self._converter.unstructure(value))

    def publish_diagnostics_json(self, uri: str, version: Optional[int], diagnostics: list[str]) -> None:
        """`textDocument/publishDiagnostics` of diagnostics already in JSON (`json_of`), written as
        pygls writes a message: the same frame, without converting and serialising them again.
        The first diagnostics that lsp/early.py already wrote are not written again."""
        data = publish_frame(uri, version, diagnostics)
        if self.early is not None and self.early.published is not None:
            published, self.early.published = self.early.published, None
            if data == published:
                return
            logger.error("atenlens: the first diagnostics published before start-up differ from the server's")
        if self.writer is None:
            logger.error("Unable to send data, no available transport!")
            return
        written = self.writer.write(data)
        if inspect.isawaitable(written):
            asyncio.ensure_future(written)

    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        """Responds, but not again to the `initialize` that lsp/early.py answered."""
        early = self.early
        if early is not None and early.initialize_id is not None and msg_id == early.initialize_id:
            early.initialize_id = None
            answer = None if error is not None else self._converter.unstructure(result)
            if answer != early.initialize_result:
                logger.error(
                    "atenlens: the initialize answer sent before start-up differs from the server's: %s",
                    json.dumps(answer) if error is None else error,
                )
            return
        super()._send_response(msg_id, result, error)

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params: types.ExecuteCommandParams) -> Any:
        commands = super().lsp_workspace__execute_command(params)
        handler, args, kwargs = next(commands)  # raises InvalidParams as pygls does
        token = params.work_done_token
        # The future the request's answer comes from; a `$/cancelRequest` cancels it, but pygls runs
        # the command in a task of its own that the cancel does not reach.
        msg_id = self._ctx_msg_id.get()
        request = self._request_futures.get(msg_id) if msg_id is not None else None
        if asyncio.iscoroutinefunction(handler):
            command = handler

            async def handler(*args: Any, **kwargs: Any) -> Any:
                if token is not None:
                    WORK_DONE_TOKEN.set(token)
                task = asyncio.current_task()
                if request is not None and task is not None:
                    request.add_done_callback(lambda future: task.cancel() if future.cancelled() else None)
                return await command(*args, **kwargs)

        result = yield handler, args, kwargs
        try:
            commands.send(result)
        except StopIteration as stop:
            return stop.value
        return result
