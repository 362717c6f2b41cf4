"""Work a web request hands off until its response has been sent: the Celery publishes of its committed writes.

A write's answer should not wait for the broker. A publish is a kombu message built in Python and a Redis round trip:
~10 % of a served remember's wall time on this machine (py-spy), and the worker it wakes competes with the
rest of the request for the same cores. Inside a request, publishes queue here and go out when the response is closed:
Django's `request_finished`, which a WSGI server sends after writing the response, so the client already has its
answer. Outside a request (Celery tasks, commands, tests calling services) they go at once.

A process that dies between the response and the publish loses the publish, as a broker outage would. A task enqueued
on commit has a sweep that finds the rows it would have handled (loopmem.runtime.task_queue); the recall-count bump
has none, and a lost bump is a recall that does not count towards graduation, as when the broker is down.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable
from typing import Any

from django.core.signals import request_finished
from django.http import HttpRequest, HttpResponse

logger = logging.getLogger(__name__)

_requests = threading.local()


def in_request() -> bool:
    """Whether this thread is serving a request whose deferred work runs after its response."""
    return getattr(_requests, "pending", None) is not None


def run_or_defer(call: Callable[[], object]) -> None:
    """`call()` after the current request's response is sent; at once outside a request.

    The call runs in a copy of the current context (the request id stays bound for its log lines and task headers).
    """
    pending: list[tuple[contextvars.Context, Callable[[], object]]] | None = getattr(_requests, "pending", None)
    if pending is None:
        call()
        return
    pending.append((contextvars.copy_context(), call))


def flush(**_: Any) -> None:
    """Run what the request deferred (connected to `request_finished`). A failing call is logged, never raised:
    the response is already out."""
    pending = getattr(_requests, "pending", None)
    _requests.pending = None
    for context, call in pending or ():
        try:
            context.run(call)
        except Exception:
            logger.exception("work deferred until after the response failed")


class AfterResponseMiddleware:
    """Opens the request's list of deferred work; `request_finished` runs it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        request_finished.connect(flush, dispatch_uid="loopmem.runtime.after_response.flush")

    def __call__(self, request: HttpRequest) -> HttpResponse:
        flush()  # a previous request whose response was never closed: its work runs now rather than never
        _requests.pending = []
        return self.get_response(request)
