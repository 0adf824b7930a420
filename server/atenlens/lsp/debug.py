"""Custom requests for tests and troubleshooting; they reveal nothing the client did not send.

`atenlens/debug/documentText` with `{"uri": ...}` answers `{"uri", "version", "text"}`: the text
the server holds after applying every incremental change, so a client can check that both sides
agree (the reliability tests do, after each of thousands of random edits), or null when the
document is not open.
"""

from __future__ import annotations

from typing import Any, Optional

from pygls.lsp.server import LanguageServer

REQUEST_DOCUMENT_TEXT = "atenlens/debug/documentText"


def _field(params: Any, name: str) -> Any:
    # pygls hands the params of a custom request over as a namedtuple-like object
    return params.get(name) if isinstance(params, dict) else getattr(params, name, None)


def register_debug_requests(server: Any) -> None:
    @server.feature(REQUEST_DOCUMENT_TEXT)
    def document_text(ls: LanguageServer, params: Any) -> Optional[dict[str, Any]]:
        uri = _field(params, "uri")
        if not isinstance(uri, str) or uri not in ls.workspace.text_documents:
            return None
        document = ls.workspace.get_text_document(uri)
        return {"uri": uri, "version": document.version, "text": document.source}
