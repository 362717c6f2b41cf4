"""The embedding task (called as a function), the backfill sweep, and `reembed`."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from loopmem.embedding import embedders
from loopmem.tenancy.scope import Scope
from loopmem.tenancy.services import tenant_set_provider
from memory import embedding, services, tasks
from memory.models import Memory

pytestmark = pytest.mark.django_db


@pytest.fixture
def scope(tenant):
    return Scope(tenant_id=tenant.id, subject_id="agent-a")


class CountingEmbedder:
    def __init__(self, fail: embedders.EmbeddingFailure | None = None) -> None:
        self.calls = 0
        self.fail = fail

    def embed(self, texts):
        self.calls += 1
        if self.fail:
            raise self.fail
        return embedders.HashingEmbedder().embed(texts)


@pytest.fixture
def provider(monkeypatch):
    embedder = CountingEmbedder()
    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: embedder)
    return embedder


def test_the_task_embeds_the_memory_with_its_model_and_content_hash(scope, provider):
    memory = services.memory_remember(scope=scope, text="hello world")
    assert tasks.embed_memory_task(str(memory.id)) == "embedded"
    memory.refresh_from_db()
    assert memory.embedding is not None
    assert len(memory.embedding) == 384  # the model's native size, unpadded
    assert memory.embedding_model == "hashing:v1"
    assert memory.embedding_content_hash == embedders.content_hash("hello world")


def test_the_task_is_idempotent_same_content_and_model_make_no_provider_call(scope, provider):
    memory = services.memory_remember(scope=scope, text="hello")
    tasks.embed_memory_task(str(memory.id))
    assert tasks.embed_memory_task(str(memory.id)) == "unchanged"
    assert provider.calls == 1


def test_a_deleted_memory_is_a_no_op(scope, provider):
    memory = services.memory_remember(scope=scope, text="hello")
    Memory.objects.filter(id=memory.id).delete()
    assert tasks.embed_memory_task(str(memory.id)) == "missing"
    assert provider.calls == 0


def test_a_permanent_failure_is_left_for_the_sweep(scope, provider):
    provider.fail = embedders.NoEmbeddingKey()
    memory = services.memory_remember(scope=scope, text="hello")
    assert tasks.embed_memory_task(str(memory.id)) == "no_embedding_key"


def test_a_transient_failure_retries(scope, provider):
    from celery.exceptions import Retry

    provider.fail = embedders.EmbeddingTimeout()
    memory = services.memory_remember(scope=scope, text="hello")
    with pytest.raises(Retry):
        tasks.embed_memory_task.apply(args=[str(memory.id)], throw=True)


def test_the_sweep_recovers_a_write_whose_task_was_lost(scope, provider, tenant):
    lost = services.memory_remember(scope=scope, text="task lost in a redis outage")
    Memory.objects.filter(id=lost.id).update(updated_at=lost.updated_at.replace(year=2020))
    fresh = services.memory_remember(scope=scope, text="task probably in flight")
    result = tasks.embedding_sweep_task()
    assert result == {"embedded": 1, "failed": 0, "tenants": 1, "failures": {}}
    assert Memory.objects.get(id=lost.id).embedding is not None
    assert Memory.objects.get(id=fresh.id).embedding is None  # settling: its own task will do it


def test_the_sweep_reembeds_rows_of_a_stale_model(scope, provider, tenant):
    memory = services.memory_remember(scope=scope, text="hello")
    embedding.memory_embed(memory_id=str(memory.id))
    Memory.objects.filter(id=memory.id).update(
        embedding_model="openai:old", updated_at=memory.updated_at.replace(year=2020)
    )
    assert tasks.embedding_sweep_task()["embedded"] == 1
    assert Memory.objects.get(id=memory.id).embedding_model == "hashing:v1"


def test_the_sweep_reports_failures_by_tag_and_keeps_the_rows(scope, provider):
    memory = services.memory_remember(scope=scope, text="hello")
    Memory.objects.filter(id=memory.id).update(updated_at=memory.updated_at.replace(year=2020))
    provider.fail = embedders.EmbeddingProviderError(503)
    assert tasks.embedding_sweep_task() == {
        "embedded": 0,
        "failed": 1,
        "tenants": 1,
        "failures": {"embedding_provider_error_503": 1},
    }
    assert Memory.objects.get(id=memory.id).embedding is None


def test_run_sweep_embedding_command(scope, provider, capsys):
    memory = services.memory_remember(scope=scope, text="hello")
    Memory.objects.filter(id=memory.id).update(updated_at=memory.updated_at.replace(year=2020))
    call_command("run_sweep", "embedding", "--json")
    assert json.loads(capsys.readouterr().out)["embedded"] == 1


def test_reembed_migrates_a_tenant_to_its_new_model(scope, tenant, provider, capsys, monkeypatch):
    for n in range(5):
        embedding.memory_embed(memory_id=str(services.memory_remember(scope=scope, text=f"t{n}").id))
    monkeypatch.setitem(embedders.DEFAULT_MODELS, "hashing", "v2")
    tenant_set_provider(tenant=tenant, embedding_model="v2")
    call_command("reembed", "--tenant", "acme", "--json", "--batch-size", "2")
    summary = json.loads(capsys.readouterr().out)
    assert (summary["model"], summary["stale"], summary["embedded"], summary["failed"]) == ("hashing:v2", 5, 5, 0)
    assert set(Memory.objects.values_list("embedding_model", flat=True)) == {"hashing:v2"}
    assert provider.calls == 5 + 3  # five single embeds, then batches of 2, 2, 1


def test_memory_oversight_lists_and_forgets_across_subjects(tenant, provider, capsys):
    services.memory_remember(scope=Scope(tenant_id=tenant.id, subject_id="a"), text="from a")
    b = services.memory_remember(scope=Scope(tenant_id=tenant.id, subject_id="b"), text="from b")
    call_command("memory_oversight", "list", "--tenant", "acme", "--json")
    listed = json.loads(capsys.readouterr().out)
    assert sorted(m["subject_id"] for m in listed["data"]) == ["a", "b"]
    call_command("memory_oversight", "list", "--tenant", "acme", "--subject", "b", "--json")
    assert [m["text"] for m in json.loads(capsys.readouterr().out)["data"]] == ["from b"]
    call_command("memory_oversight", "forget", "--tenant", "acme", str(b.id), "--json")
    assert json.loads(capsys.readouterr().out) == {"id": str(b.id), "deleted": True}
    assert not Memory.objects.filter(id=b.id).exists()


def test_a_text_the_provider_refuses_does_not_block_the_rows_behind_it(scope, monkeypatch):
    class RefusesPoison:
        def embed(self, texts):
            if any("poison" in t for t in texts):
                raise embedders.EmbeddingProviderError(400, "too many tokens")
            return embedders.HashingEmbedder().embed(texts)

    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: RefusesPoison())
    poison = services.memory_remember(scope=scope, text="poison " * 10)
    others = [services.memory_remember(scope=scope, text=f"fine {n}") for n in range(3)]
    Memory.objects.update(updated_at=poison.updated_at.replace(year=2020))
    assert tasks.embedding_sweep_task() == {
        "embedded": 3,
        "failed": 1,
        "tenants": 1,
        "failures": {"embedding_provider_error_400": 1},
    }
    assert all(Memory.objects.get(id=m.id).embedding is not None for m in others)
    assert Memory.objects.get(id=poison.id).embedding is None
