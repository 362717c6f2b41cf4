"""Structured logs: the request id (accepted, generated, echoed, carried into tasks), JSON lines, and no secret,
API key or memory text in any log line the service writes while handling them."""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from celery import current_app

from loopmem.http import request_id
from loopmem.http.request_id import RequestIdFilter
from loopmem.observability.json_logs import JsonFormatter
from loopmem.tenancy.scope import Scope
from loopmem.tenancy.services import tenant_set_provider
from memory import embedding
from memory.promotion import jobs as promotion
from tests.memory.conftest import embed_pending, heavy_db, recall, remember


class Captured(logging.Handler):
    """Every record at DEBUG and above, formatted as production (JSON) and development (text) would."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.addFilter(RequestIdFilter())
        self.json = JsonFormatter()
        self.text = logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s")
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.json.format(record))
        self.lines.append(self.text.format(record))
        if record.exc_info:
            self.lines.append(self.text.formatException(record.exc_info))

    def json_entries(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.lines if line.startswith("{")]


@pytest.fixture
def captured() -> Iterator[Captured]:
    handler = Captured()
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)


# --- the request id ----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_presented_request_id_is_echoed(client_for):
    response = client_for().get("/healthz", HTTP_X_REQUEST_ID="trace-42.a:b")
    assert response["X-Request-Id"] == "trace-42.a:b"


@pytest.mark.django_db
@pytest.mark.parametrize("presented", [None, "", "has spaces", "x" * 129, "new\nline"])
def test_a_missing_or_unusable_request_id_is_replaced_by_a_fresh_one(client_for, presented):
    headers = {} if presented is None else {"HTTP_X_REQUEST_ID": presented}
    first = client_for().get("/healthz", **headers)["X-Request-Id"]
    second = client_for().get("/healthz", **headers)["X-Request-Id"]
    assert len(first) == 32
    assert int(first, 16) >= 0
    assert first != second


@pytest.mark.django_db
def test_log_lines_of_a_request_carry_its_id_as_json(client_for, captured):
    client_for().get("/api/v1/no-such-route", HTTP_X_REQUEST_ID="req-7")
    entries = [e for e in captured.json_entries() if e["logger"] == "django.request"]
    assert entries, captured.lines
    assert {e["request_id"] for e in entries} == {"req-7"}
    assert set(entries[0]) >= {"ts", "level", "logger", "message", "request_id"}
    assert request_id.current() == ""  # unbound once the request is answered


@heavy_db
def test_a_task_enqueued_by_a_request_carries_its_id(agent):
    current_app.control.purge()
    try:
        created = agent.post("/api/v1/memory", {"text": "carry me"}, format="json", HTTP_X_REQUEST_ID="req-carry")
        assert created.status_code == 201
        with current_app.connection_for_write() as connection:
            raw = connection.default_channel.client.lrange("embedding", 0, -1)
        messages = [json.loads(item) for item in raw]
        [message] = [m for m in messages if m["headers"]["task"] == "memory.tasks.embed_pending_memories_task"]
        assert message["headers"]["request_id"] == "req-carry"
    finally:
        current_app.control.purge()


def test_a_task_runs_with_the_enqueuing_requests_id_then_lets_it_go():
    task = SimpleNamespace(request=SimpleNamespace(request_id="req-9", id="task-1"))
    request_id.bind_task_request_id(task=task)
    assert request_id.current() == "req-9"
    request_id.unbind_task_request_id(task=task)
    assert request_id.current() == ""
    own = SimpleNamespace(request=SimpleNamespace(id="task-2"))  # sent by beat, not by a request
    request_id.bind_task_request_id(task=own)
    assert request_id.current() == "task-2"
    request_id.unbind_task_request_id(task=own)


def test_the_json_formatter_writes_named_fields_never_the_request():
    record = logging.LogRecord("django.request", logging.WARNING, __file__, 1, "Not Found: %s", ("/x",), None)
    record.request = SimpleNamespace(headers={"Authorization": "Bearer lm_secret"})
    record.request_id = "r-1"
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == "Not Found: /x"
    assert entry["request_id"] == "r-1"
    assert "request" not in entry
    assert "lm_secret" not in json.dumps(entry)


# --- nothing secret in any line --------------------------------------------------------------------------


def marker(kind: str) -> str:
    return f"MARK{kind}{secrets.token_hex(6)}"


@heavy_db
def test_no_secret_key_or_memory_text_reaches_a_log_line(captured, client_for, agent, agent_key, tenant, fake_llm):
    written = {
        "memory text": marker("memory"),
        "recall query": marker("query"),
        "session turn": marker("turn"),
        "promoted text": marker("promoted"),
        "embedding key": "sk-" + marker("embedkey"),
        "llm key": "sk-" + marker("llmkey"),
        "bad bearer": "lm_" + marker("badkey"),
    }
    # A memory, embedded, recalled; a session promoted through the tenant's LLM.
    remember(agent, f"the vault code is {written['memory text']}")
    embed_pending()
    recall(agent, f"what is {written['recall query']}")
    for role, content in (("user", f"always {written['session turn']}"), ("assistant", "Noted.")):
        turn = {"tier": "session", "session_id": "s-1", "role": role, "content": content}
        assert agent.post("/api/v1/memory", turn, format="json").status_code == 201
    tenant_set_provider(
        tenant=tenant, llm="openai", llm_base_url=fake_llm.url, llm_api_key=written["llm key"], llm_model="m"
    )
    fake_llm.reply = json.dumps([{"text": f"Always {written['promoted text']}", "confidence": 0.9}])
    job = promotion.promotion_request(scope=Scope(tenant_id=tenant.id, subject_id="agent-a"), session_id="s-1")
    assert promotion.promotion_run(job_id=str(job.id)).outcome == "promoted"
    # A provider that cannot be reached, holding a key: the failure is logged, the key and the text are not.
    unreachable = "http://127.0.0.1:9/v1"
    tenant_set_provider(
        tenant=tenant, embedding="openai", embedding_base_url=unreachable, embedding_api_key=written["embedding key"]
    )
    failing = remember(agent, f"second {written['memory text']}")
    with pytest.raises(Exception):  # noqa: B017, PT011  (whichever failure: what matters is what was logged)
        embedding.memory_embed(memory_id=failing["id"])
    recall(agent, f"again {written['recall query']}")  # degrades to the fallback, logging why
    # A caller with a made-up key, and the real key used once more.
    assert client_for().get("/api/v1/memory", HTTP_AUTHORIZATION=f"Bearer {written['bad bearer']}").status_code == 401
    assert agent.get("/api/v1/memory").status_code == 200

    assert len(captured.lines) > 10, "the capture saw nothing: this test would prove nothing"
    assert any("memory_promotion.promoted" in line for line in captured.lines)
    log = "\n".join(captured.lines)
    leaked = {what: text for what, text in {**written, "agent key": agent_key.raw_key}.items() if text in log}
    assert leaked == {}, f"found in logs: {sorted(leaked)}"
