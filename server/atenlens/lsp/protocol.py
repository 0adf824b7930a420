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
"""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Callable, Optional

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol


class _Answered:
    """Stands in for a request that was already answered with an error while parsing."""

    jsonrpc = ""


ANSWERED = _Answered()


class AtenlensProtocol(LanguageServerProtocol):
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
