"""Every series on /metrics moves when its event happens, read back through the guarded endpoint itself."""

from __future__ import annotations

import json

import pytest
from celery import current_app
from django.test import override_settings
from prometheus_client.parser import text_string_to_metric_families

from loopmem.embedding import embedders
from loopmem.embedding.work_queue import Keys
from loopmem.http.metrics_endpoint import recall_path_of
from loopmem.providers import circuit_breaker
from loopmem.redis.client import redis_client
from loopmem.tenancy.scope import Scope
from loopmem.tenancy.services import tenant_set_provider
from memory.models import PromotionJob
from memory.promotion import jobs as promotion
from tests.factories import TenantFactory
from tests.memory.conftest import embed_pending, heavy_db, recall, remember

TOKEN = "metrics-test-token"


@pytest.fixture(autouse=True)
def _metrics_token():
    with override_settings(METRICS_TOKEN=TOKEN):
        yield


def scrape(client) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples, name: str, **labels: str) -> float:
    return float(samples.get((name, frozenset(labels.items())), 0.0))


class Moves:
    """Scrape before and after an event; `delta(name, **labels)` is how far the series moved."""

    def __init__(self, client) -> None:
        self.client = client
        self.before = scrape(client)

    def delta(self, name: str, **labels: str) -> float:
        return value(scrape(self.client), name, **labels) - value(self.before, name, **labels)


@pytest.fixture
def moves(client_for):
    return lambda: Moves(client_for())


# --- the guard --------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_metrics_answer_only_the_token(client_for):
    client = client_for()
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 404
    answered = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert answered.status_code == 200
    assert answered["Content-Type"].startswith("text/plain")
    with override_settings(METRICS_TOKEN=""):
        assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 404


# --- events -----------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_requests_are_counted_by_route_and_status(moves, agent, client_for):
    move = moves()
    agent.get("/api/v1/memory")
    client_for().get("/api/v1/memory")
    assert move.delta("loopmem_http_requests_total", route="memory-list", method="GET", status="200") == 1
    assert move.delta("loopmem_http_requests_total", route="memory-list", method="GET", status="401") == 1
    assert move.delta("loopmem_http_request_seconds_count", route="memory-list", method="GET") == 2


@heavy_db
def test_recall_latency_is_observed_by_path(moves, agent, tenant):
    remember(agent, "the deploy key rotates every friday")
    embed_pending()
    move = moves()
    recall(agent, "deploy key")
    with override_settings(RECALL_EXACT_MAX_ROWS=0):
        recall(agent, "deploy key")
    agent.post("/api/v1/recall", {"query": "deploy key"}, format="json")
    tenant_set_provider(tenant=tenant, embedding="openai", embedding_api_key="")  # no key: the fallback answers
    recall(agent, "deploy key")
    series = "loopmem_recall_seconds_count"
    assert move.delta(series, route="memory-recall", path="exact", mode="semantic") == 1
    assert move.delta(series, route="memory-recall", path="ann", mode="semantic") == 1
    assert move.delta(series, route="memory-recall", path="fallback", mode="semantic") == 1
    assert move.delta(series, route="recall-list", path="exact", mode="semantic") == 1


def test_the_recall_path_is_read_from_either_envelope():
    assert recall_path_of({"meta": {"fallback": False, "recall_path": "ann", "mode": "hybrid"}}) == ("ann", "hybrid")
    assert recall_path_of({"meta": {"fallback": True}}) == ("fallback", "semantic")
    merged = {"meta": {"query": "q"}, "memory": {"meta": {"fallback": False, "recall_path": "exact"}}}
    assert recall_path_of(merged) == ("exact", "semantic")
    assert recall_path_of(None) == ("unknown", "semantic")


@pytest.mark.django_db
def test_embedding_latency_is_observed_by_provider_and_outcome(moves, tenant):
    move = moves()
    embedders.embed_texts(tenant, ["one", "two"])
    tenant_set_provider(tenant=tenant, embedding="openai", embedding_api_key="")
    with pytest.raises(embedders.NoEmbeddingKey):
        embedders.embed_texts(tenant, ["three"])
    assert move.delta("loopmem_embedding_seconds_count", provider="hashing", outcome="ok") == 1
    assert move.delta("loopmem_embedding_seconds_count", provider="openai", outcome="no_embedding_key") == 1


@pytest.mark.django_db
def test_an_opening_circuit_is_counted_and_shown_open_per_provider(moves):
    move = moves()
    breaker = circuit_breaker.Breaker("tenant-x:openai")
    for _ in range(circuit_breaker.FAILURE_THRESHOLD):
        breaker.record_failure()
    assert breaker.open_for() is not None
    assert move.delta("loopmem_circuit_breaker_opened_total", provider="openai") == 1
    assert move.delta("loopmem_circuit_breakers_open", provider="openai") == 1


@heavy_db
def test_promotion_events_jobs_and_compile_latency_move(moves, agent, tenant, fake_llm):
    tenant_set_provider(tenant=tenant, llm="openai", llm_base_url=fake_llm.url, llm_api_key="sk-t", llm_model="m")
    fake_llm.reply = json.dumps([{"text": "Always reship expedited instead of refunding.", "confidence": 0.9}])
    for role, content in (("user", "I always reship expedited instead of refunding."), ("assistant", "Noted.")):
        turn = {"tier": "session", "session_id": "s-1", "role": role, "content": content}
        assert agent.post("/api/v1/memory", turn, format="json").status_code == 201
    move = moves()
    job = promotion.promotion_request(scope=Scope(tenant_id=tenant.id, subject_id="agent-a"), session_id="s-1")
    assert move.delta("loopmem_promotion_jobs", state="pending") == 1
    move = moves()
    promotion.promotion_run(job_id=str(job.id))
    assert PromotionJob.objects.get(id=job.id).state == PromotionJob.State.DONE
    assert move.delta("loopmem_promotion_jobs", state="pending") == -1
    assert move.delta("loopmem_promotion_jobs", state="done") == 1
    assert move.delta("loopmem_promotion_events_total", event="compiled") == 1
    assert move.delta("loopmem_promotion_compile_seconds_count", compiler="openai") == 1


@heavy_db
def test_graduation_outcomes_are_counted(moves, agent):
    memory = remember(agent, "Rotate the staging database password every ninety days")
    embed_pending()
    move = moves()
    assert agent.post("/api/v1/memory/graduate", {"memory_id": memory["id"]}, format="json").status_code == 201
    agent.post("/api/v1/memory/graduate", {"memory_id": "00000000-0000-4000-8000-000000000000"}, format="json")
    assert move.delta("loopmem_graduations_total", outcome="created") == 1
    assert move.delta("loopmem_graduations_total", outcome="NotFound") == 1


@pytest.mark.django_db
def test_rate_limit_rejections_are_counted_by_limit(moves, client_for, make_key):
    small = TenantFactory.create(slug="tiny", rate_limit_requests_per_minute=1)
    client = client_for(make_key("agent", small))
    move = moves()
    assert client.get("/api/v1/memory").status_code == 200
    assert client.get("/api/v1/memory").status_code == 429
    assert move.delta("loopmem_rate_limit_rejections_total", limit="key") == 1
    assert move.delta("loopmem_rate_limit_rejections_total", limit="tenant") == 0


@heavy_db
def test_heavy_read_admissions_and_sheds_are_counted(moves, agent):
    remember(agent, "a fact")
    embed_pending()
    move = moves()
    recall(agent, "fact")
    with override_settings(HEAVY_READ_MAX_IN_FLIGHT=0):
        shed = agent.post("/api/v1/memory/recall", {"query": "fact"}, format="json")
        assert shed.json()["error"]["code"] == "heavy_read_overloaded"
    assert move.delta("loopmem_heavy_read_admitted_total") == 1
    assert move.delta("loopmem_heavy_read_rejections_total") == 1
    samples = scrape(move.client)
    assert value(samples, "loopmem_heavy_read_limit") == 16
    assert value(samples, "loopmem_heavy_read_in_flight") == 0  # every slot was given back


# --- state read at scrape time ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_embedding_backlog_counts_rows_waiting(moves, agent):
    move = moves()
    remember(agent, "waits for its vector")
    assert move.delta("loopmem_embedding_backlog", table="memories") == 1
    embed_pending()
    assert move.delta("loopmem_embedding_backlog", table="memories") == 0


@pytest.mark.django_db
def test_the_embedding_queue_counts_rows_pending_and_claimed(moves, tenant):
    keys = Keys("memories", tenant.id)
    move = moves()
    try:
        redis_client().rpush(keys.pending, "m-1", "m-2")
        redis_client().rpush(keys.claim("task-1"), "m-3")
        assert move.delta("loopmem_embedding_queue_rows", table="memories", state="pending") == 2
        assert move.delta("loopmem_embedding_queue_rows", table="memories", state="claimed") == 1
    finally:
        redis_client().delete(keys.pending, keys.claim("task-1"))


@pytest.mark.django_db
def test_celery_queue_depth_counts_waiting_messages_per_queue(moves):
    current_app.control.purge()
    move = moves()
    try:
        current_app.send_task("memory.tasks.embed_memory_task", args=["00000000-0000-4000-8000-000000000000"])
        current_app.send_task("memory.tasks.promotion_sweep_task")
        current_app.send_task("memory.tasks.bump_recall_counts_task", args=["t", []])
        assert move.delta("loopmem_celery_queue_depth", queue="embedding") == 1
        assert move.delta("loopmem_celery_queue_depth", queue="sweeps") == 1
        assert move.delta("loopmem_celery_queue_depth", queue="default") == 1
        assert move.delta("loopmem_celery_queue_depth", queue="promotion") == 0
    finally:
        current_app.control.purge()
