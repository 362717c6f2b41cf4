"""The HTTP server's own refusals, in the API's error envelope.

gunicorn refuses a request it cannot parse before any application code runs: a request line past
`limit_request_line` (414), more headers than `limit_request_fields` or one past `limit_request_field_size` (431),
a malformed `Content-Length`, chunk or header (a NUL in it, say: 400), an unsupported transfer coding (501). It
writes those answers with `gunicorn.util.write_error`, an HTML page; `install` replaces that one function, in each
web worker, with one that writes `{"error": {"status", "code", "message", "details"}}` as JSON, so a client parses
every refusal the same way. The statuses and the server's reasons stay gunicorn's.
"""

from __future__ import annotations

import json
import socket
from http import HTTPStatus

from loopmem.errors import BadRequest, Forbidden, ServerError

# The stable code for each status gunicorn answers with itself (docs/api.md, "Refusals of the HTTP server").
CODES = {
    400: BadRequest.code,
    403: Forbidden.code,
    414: "uri_too_long",
    417: "expectation_failed",
    431: "header_fields_too_large",
    500: ServerError.code,
    501: "not_implemented",
}


def refusal_bytes(status: int, reason: str, message: str) -> bytes:
    """The whole HTTP response for a refusal: the envelope, closed after (the request could not be framed)."""
    body = json.dumps(
        {
            "error": {
                "status": status,
                "code": CODES.get(status, BadRequest.code if status < 500 else ServerError.code),
                "message": message or reason,
                "details": {},
            }
        }
    ).encode()
    # The standard phrase: gunicorn passes "Bad Request" with some other statuses (its 501, say).
    reason = _phrase(status, reason)
    head = (
        f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1", "replace") + body


def _phrase(status: int, fallback: str) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return fallback


def write_error(sock: socket.socket, status_int: int, reason: str, mesg: str) -> None:
    """`gunicorn.util.write_error`'s signature and its non-blocking write, with the envelope for the page."""
    from gunicorn import util

    util.write_nonblock(sock, refusal_bytes(status_int, reason, mesg))


def install() -> None:
    """Make gunicorn's workers write their refusals in the envelope (they call `util.write_error` by name)."""
    from gunicorn import util

    util.write_error = write_error
