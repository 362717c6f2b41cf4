"""Hostile input stopped at the edge, before any view sees it: the body's size (413, checked before the body is
read, chunked bodies included), its nesting depth, and what no store accepts anywhere it enters — text with NUL
characters or lone UTF-16 surrogates (JSON keys and values, the URL path, the query string) and JSON numbers that
jsonb cannot hold (NaN, ±Infinity, overflowing literals). Each is a 4xx with a stable code, never a 500.

`loads_json` is the one way JSON text from a client becomes a value: request bodies, JSON query parameters and
import lines all pass through it (or through `check_json` when they were parsed as a whole first)."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from gunicorn.http.errors import ParseException
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from loopmem.errors import (
    BadRequest,
    DomainError,
    InvalidNumber,
    InvalidText,
    LengthRequired,
    PayloadTooLarge,
    TooDeeplyNested,
)

# What a server raises while it decodes a chunked body: gunicorn's parse errors (a bad chunk size, a missing
# terminator) and an IOError for a body cut short. All of them are the client's malformed request.
MALFORMED_CHUNKS: tuple[type[BaseException], ...] = (ParseException, OSError, ValueError)

MAX_JSON_DEPTH = 32  # metadata is small documents; deeper nesting is a parser attack, not data


def text_problem(text: str) -> bool:
    """True if `text` holds a NUL or a lone surrogate (both make PostgreSQL or the encoders fail)."""
    if "\x00" in text:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def loads_json(text: str, *, where: str = "body") -> Any:
    """Client JSON text → a value PostgreSQL can store, or a 4xx: malformed text raises ValueError (the caller
    names the field), nesting past the limit 400 `too_deeply_nested`, then `check_json`'s rules. `where` names
    the text in an error's `details.field` ("body", "query.metadata", "line 3")."""
    try:
        parsed = json.loads(text)
    except RecursionError as exc:
        raise TooDeeplyNested(details={"max_depth": MAX_JSON_DEPTH}) from exc
    check_json(parsed, where=where)
    return parsed


def check_json(value: Any, *, where: str = "body") -> None:
    """Walk a parsed JSON value (iteratively: no recursion to exhaust) for depth, bad text and numbers jsonb
    cannot hold (Python's parser reads NaN and Infinity, and turns an overflowing literal such as 1e400 into inf).
    A failure names the place: `body.metadata.k`, `body.tags[2]`."""
    stack: list[tuple[Any, int, str]] = [(value, 1, where)]
    while stack:
        item, depth, where = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise TooDeeplyNested(details={"max_depth": MAX_JSON_DEPTH})
        if isinstance(item, str):
            if text_problem(item):
                raise InvalidText(details={"field": where})
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidNumber(details={"field": where})
        elif isinstance(item, dict):
            for key, child in item.items():
                if text_problem(key):
                    raise InvalidText(details={"field": where})
                stack.append((child, depth + 1, f"{where}.{key}"))
        elif isinstance(item, list):
            stack.extend((child, depth + 1, f"{where}[{n}]") for n, child in enumerate(item))


def route_limit(view: Any, action: str | None) -> int:
    """The route's own body limit, or the deployment's. A DRF action declares its own with
    `@action(max_body_bytes=N)` (an import); `view` is the view class or instance."""
    handler = getattr(view, action, None) if view is not None and action else None
    limit = getattr(handler, "kwargs", {}).get("max_body_bytes") if handler is not None else None
    return int(limit or settings.MAX_REQUEST_BODY_BYTES)


class StrictJSONParser(JSONParser):
    """DRF's JSON parser, bounded: size first (Content-Length, then the bytes actually read), then depth and text."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        view = (parser_context or {}).get("view")
        limit = route_limit(view, getattr(view, "action", None))
        # The middleware refused a declared length over the limit; a body sent without one is cut here.
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise PayloadTooLarge(details={"max_bytes": limit})
        try:
            return loads_json(raw.decode(settings.DEFAULT_CHARSET))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc


class EdgeInputMiddleware:
    """Before any view runs: NUL or lone surrogates in the path or the query string → 400 `invalid_text`; a
    declared body over the route's limit → 413 `payload_too_large`, unread; a chunked body read to its end under
    the same limit (413 past it), so the view sees it exactly as if its length had been declared."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        where = _bad_text_in_url(request)
        if where is not None:
            return _refuse(InvalidText(details={"field": where}))
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view: Any, args: Any, kwargs: Any) -> HttpResponse | None:
        # `view` is what Django resolved: a DRF viewset's function carries its class and method → action map.
        action = (getattr(view, "actions", None) or {}).get((request.method or "").lower())
        limit = route_limit(getattr(view, "cls", None), action)
        declared = request.META.get("CONTENT_LENGTH") or ""
        if declared.isdigit() and int(declared) > limit:
            return _refuse(PayloadTooLarge(details={"max_bytes": limit}))
        if not declared and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
            try:
                _read_chunked_body(request, limit)
            except DomainError as error:
                return _refuse(error)
        return None


def _read_chunked_body(request: HttpRequest, limit: int) -> None:
    """Django reads a body by its declared length alone, so a chunked one (no Content-Length) would arrive empty.
    The server has already decoded the chunks; read them to the end here, at most `limit` bytes, and declare the
    length they came to. Only a server that ends the input at the body's end can be read this way
    (`wsgi.input_terminated`, which gunicorn sets); elsewhere the client is asked for a length (411)."""
    if not request.META.get("wsgi.input_terminated"):
        raise LengthRequired()
    stream = request.META["wsgi.input"]
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        try:
            chunk = stream.read(min(64 * 1024, limit + 1 - size))
        except MALFORMED_CHUNKS as exc:
            raise BadRequest(f"The chunked body is malformed: {exc.__class__.__name__}") from exc
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise PayloadTooLarge(details={"max_bytes": limit})
    body = b"".join(chunks)
    request.META["CONTENT_LENGTH"] = str(len(body))
    # Django built the request's stream from the absent length (nothing to read); Django itself swaps `_stream`
    # for the body it read (HttpRequest.body), and so does this.
    request._stream = io.BytesIO(body)


def _refuse(error: DomainError) -> JsonResponse:
    return JsonResponse(error.body(), status=error.status)


def _bad_text_in_url(request: HttpRequest) -> str | None:
    if text_problem(request.path):
        return "path"
    for key, values in request.GET.lists():
        if text_problem(key):
            return "query"
        if any(text_problem(value) for value in values):
            return f"query.{key}"
    return None
