"""The request id: accepted from `X-Request-Id` (or generated), echoed, stamped on every log line of the
request, and carried into the Celery tasks the request enqueues (a message header), whose log lines carry it too.
"""

from __future__ import annotations

import contextvars
import logging
import re
import uuid
from collections.abc import Callable
from typing import Any

from django.core.signals import request_finished
from django.http import HttpRequest, HttpResponse

HEADER = "X-Request-Id"
# What a caller may choose: short, printable, no spaces (it lands in log lines and headers verbatim).
_ACCEPTABLE = re.compile(r"[A-Za-z0-9._:/+=-]{1,128}")

_current: contextvars.ContextVar[str] = contextvars.ContextVar("loopmem_request_id", default="")


def current() -> str:
    """The id of the request or task being handled here, or '' outside one."""
    return _current.get()


def bind(request_id: str) -> contextvars.Token[str]:
    """Make `request_id` current (until `unbind` with the returned token)."""
    return _current.set(request_id)


def unbind(token: contextvars.Token[str]) -> None:
    _current.reset(token)


def accept_or_generate(presented: str | None) -> str:
    """The caller's id when it is acceptable, else a fresh one (never an error: ids are for tracing)."""
    if presented and _ACCEPTABLE.fullmatch(presented):
        return presented
    return uuid.uuid4().hex


class RequestIdMiddleware:
    """Binds the request id for the request's duration and echoes it in the response.

    The id stays bound until `request_finished`: Django logs a 4xx/5xx (`django.request`) after the middleware
    chain has returned, and that line must carry the id too.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        request_finished.connect(_clear, dispatch_uid="loopmem.http.request_id.clear")

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = accept_or_generate(request.headers.get(HEADER))
        bind(request_id)
        response = self.get_response(request)
        response[HEADER] = request_id
        return response


def _clear(**_: Any) -> None:
    _current.set("")


class RequestIdFilter(logging.Filter):
    """Adds `record.request_id` ('-' outside a request or task) so every formatter can print it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", None):
            record.request_id = current() or "-"
        return True


# --- Celery: the header out, the context in ------------------------------------------------------------------


def stamp_outgoing_task(headers: dict[str, Any] | None = None, **_: Any) -> None:
    """`before_task_publish`: a task sent while handling a request carries the request's id."""
    request_id = current()
    if headers is not None and request_id and "request_id" not in headers:
        headers["request_id"] = request_id


def bind_task_request_id(task: Any = None, **_: Any) -> None:
    """`task_prerun`: the task's log lines carry the id of the request that enqueued it (or the task's own id)."""
    request_id = getattr(task.request, "request_id", None) if task is not None else None
    token = bind(str(request_id or getattr(task.request, "id", "") or ""))
    if task is not None:
        task.request.loopmem_request_id_token = token


def unbind_task_request_id(task: Any = None, **_: Any) -> None:
    """`task_postrun`: restore the worker's context."""
    token = getattr(task.request, "loopmem_request_id_token", None) if task is not None else None
    if token is not None:
        unbind(token)
