"""Celery publishes of a request's writes go out after its response is closed (loopmem.runtime.after_response);
outside a request at once; never lost to a failing neighbour, and carrying the request's id."""

from __future__ import annotations

from typing import Any

import pytest
from celery import current_app
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory

from loopmem.embedding.work_queue import Keys
from loopmem.http import request_id
from loopmem.redis.client import redis_client
from loopmem.runtime import after_response, task_queue
from loopmem.runtime.after_response import AfterResponseMiddleware

TASK = "memory.tasks.embed_memory_task"


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...], str]]:
    """What reached the broker: (task, args, the request id bound when it was published)."""
    sent: list[tuple[str, tuple[Any, ...], str]] = []

    def send_task(name: str, args: tuple[Any, ...] = (), **_: Any) -> None:
        sent.append((name, tuple(args), request_id.current()))

    monkeypatch.setattr(current_app, "send_task", send_task)
    return sent


def _serve(view) -> HttpResponse:
    middleware = AfterResponseMiddleware(view)
    return middleware(RequestFactory().post("/api/v1/memory"))


def test_a_publish_inside_a_request_waits_for_the_response_to_close(published):
    def view(request: HttpRequest) -> HttpResponse:
        task_queue.send(TASK, ("m-1",))
        return HttpResponse(status=201)

    response = _serve(view)
    assert published == []  # the answer is ready and nothing was published yet
    response.close()  # what the WSGI server does once it has written the response
    assert [(name, args) for name, args, _ in published] == [(TASK, ("m-1",))]


def test_outside_a_request_a_publish_goes_at_once(published):
    task_queue.send(TASK, ("m-2",))
    assert [(name, args) for name, args, _ in published] == [(TASK, ("m-2",))]


def test_a_deferred_publish_carries_the_requests_id(published):
    def view(request: HttpRequest) -> HttpResponse:
        token = request_id.bind("req-42")
        try:
            task_queue.send(TASK, ("m-3",))
        finally:
            request_id.unbind(token)
        return HttpResponse(status=201)

    _serve(view).close()
    assert published == [(TASK, ("m-3",), "req-42")]


def test_a_failing_deferred_call_is_logged_and_the_rest_still_run(published, caplog):
    def broken() -> None:
        raise RuntimeError("the broker said no")

    def view(request: HttpRequest) -> HttpResponse:
        after_response.run_or_defer(broken)
        task_queue.send(TASK, ("m-4",))
        return HttpResponse(status=201)

    _serve(view).close()
    assert [args for _, args, _ in published] == [("m-4",)]
    assert "deferred until after the response failed" in caplog.text


def test_work_a_request_left_unsent_goes_out_with_the_next_request(published):
    def view(request: HttpRequest) -> HttpResponse:
        task_queue.send(TASK, ("m-5",))
        return HttpResponse(status=201)

    _serve(view)  # never closed
    assert published == []
    _serve(lambda request: HttpResponse(status=200)).close()
    assert [args for _, args, _ in published] == [("m-5",)]


@pytest.mark.django_db(transaction=True)
def test_a_remember_through_the_api_queues_its_embedding_after_answering(agent, tenant, sent_tasks):
    response = agent.post("/api/v1/memory", {"text": "deploys go out on Tuesdays"}, format="json")
    assert response.status_code == 201
    assert sent_tasks == [("memory.tasks.embed_pending_memories_task", (str(tenant.id),))]
    pending = redis_client().lrange(Keys("memories", tenant.id).pending, 0, -1)
    assert pending == [response.json()["data"]["id"].encode()]
