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
as LSP does.

pygls 2.1 passes a command handler only the command's arguments; the `workDoneToken` a client
sends with `workspace/executeCommand` (VS Code always sends one) is lost, so the server could only
report progress under a token of its own, which VS Code shows apart from the command. Here the
token is put in WORK_DONE_TOKEN for the command's handler (a context variable: each handler runs
in its own task, so concurrent commands each see their own). And a `$/cancelRequest` for a command
only cancelled the future its answer comes from, not the task running the command (a trace ran on
to its hard timeout); here the command's task is cancelled with it.
"""
from __future__ import annotations

import asyncio
import contextvars
import re
from concurrent.futures import Future
from typing import Any, Callable, Optional, Sequence

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method
from pygls.workspace import TextDocument, Workspace

# The workDoneToken of the `workspace/executeCommand` request whose handler is running, if any.
WORK_DONE_TOKEN: contextvars.ContextVar[Optional[types.ProgressToken]] = contextvars.ContextVar(
    "atenlens_work_done_token", default=None)

# A line and its end, as LSP counts lines (the last line may have no end).
_LSP_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def lsp_lines(text: str) -> tuple[str, ...]:
    """`text.splitlines(keepends=True)`, but breaking only at \\n, \\r\\n and \\r."""
    return tuple(_LSP_LINE.findall(text))


class LspTextDocument(TextDocument):
    @property
    def lines(self) -> Sequence[str]:
        return lsp_lines(self.source)


class LspWorkspace(Workspace):
    def _create_text_document(self, doc_uri: str, source: Optional[str] = None, version: Optional[int] = None,
                              language_id: Optional[str] = None) -> TextDocument:
        return LspTextDocument(doc_uri, source=source, version=version, language_id=language_id,
                               sync_kind=self._sync_kind, position_codec=self._position_codec)


class _Answered:
    """Stands in for a request that was already answered with an error while parsing."""

    jsonrpc = ""


ANSWERED = _Answered()


class AtenlensProtocol(LanguageServerProtocol):
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
            if not ("id" in data and isinstance(data.get("method"), str)):
                raise                   # a notification or a response: nobody waits for an answer
            if isinstance(error, JsonRpcInvalidParams):
                error = JsonRpcInvalidParams(message=f"Invalid params for {data['method']}")
            self._send_response(data["id"], None, error.to_response_error())
            return ANSWERED

    def _execute_handler(self, msg_id: Any, handler: Callable[..., Any], callback: Callable[[Future], Any],
                         args: Optional[tuple[Any, ...]] = None, kwargs: Optional[dict[str, Any]] = None) -> None:
        if getattr(callback, "__func__", None) is LanguageServerProtocol._check_handler_result:
            check_result = callback      # a notification: nobody will ever look its future up

            def callback(future: Future, msg_id: Any = msg_id) -> None:
                self._request_futures.pop(msg_id, None)
                check_result(future)
        super()._execute_handler(msg_id, handler, callback, args, kwargs)

    def handle_message(self, message: Any) -> None:
        if message is ANSWERED:
            return
        super().handle_message(message)

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params: types.ExecuteCommandParams) -> Any:
        commands = super().lsp_workspace__execute_command(params)
        handler, args, kwargs = next(commands)      # raises InvalidParams as pygls does
        token = params.work_done_token
        # The future the request's answer comes from; a `$/cancelRequest` cancels it, but pygls runs
        # the command in a task of its own that the cancel does not reach.
        request = self._request_futures.get(self._ctx_msg_id.get())
        if asyncio.iscoroutinefunction(handler):
            command = handler

            async def handler(*args: Any, **kwargs: Any) -> Any:
                if token is not None:
                    WORK_DONE_TOKEN.set(token)
                if request is not None:
                    task = asyncio.current_task()
                    request.add_done_callback(lambda future: task.cancel() if future.cancelled() else None)
                return await command(*args, **kwargs)
        result = yield handler, args, kwargs
        try:
            commands.send(result)
        except StopIteration as stop:
            return stop.value
        return result
