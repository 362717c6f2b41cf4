"""Hostile input stopped at the edge, before any view sees it: the body's size (413, checked before the body is
read), its nesting depth, and text no store accepts (NUL characters, lone UTF-16 surrogates) anywhere text enters —
JSON keys and values, the URL path, the query string. Each is a 4xx with a stable code, never a 500."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from loopmem.errors import DomainError, InvalidText, PayloadTooLarge, TooDeeplyNested

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


def check_json(value: Any) -> None:
    """Walk a parsed JSON value (iteratively: no recursion to exhaust) for depth and bad text."""
    stack: list[tuple[Any, int, str]] = [(value, 1, "body")]
    while stack:
        item, depth, where = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise TooDeeplyNested(details={"max_depth": MAX_JSON_DEPTH})
        if isinstance(item, str):
            if text_problem(item):
                raise InvalidText(details={"field": where})
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
            parsed = json.loads(raw.decode(settings.DEFAULT_CHARSET))
        except RecursionError as exc:
            raise TooDeeplyNested(details={"max_depth": MAX_JSON_DEPTH}) from exc
        except (ValueError, UnicodeDecodeError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc
        check_json(parsed)
        return parsed


class EdgeInputMiddleware:
    """Before any view runs: NUL or lone surrogates in the path or the query string → 400 `invalid_text`; a
    declared body over the route's limit → 413 `payload_too_large`, unread."""

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
        return None


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
