"""`reembed --provider/--model`: a tenant moves to another model while recall keeps answering with the old one,
then one transaction swaps every vector in; a crash loses nothing and a rerun finishes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from django.core.management import call_command

from knowledge.embedding import ARTICLE_EMBEDDINGS
from knowledge.models import Article
from loopmem.embedding import embedders
from loopmem.embedding.pipeline import reembed_pending, reembed_swap
from loopmem.models import Tenant
from loopmem.tenancy.services import tenant_set_provider
from memory.embedding import MEMORY_EMBEDDINGS
from memory.models import Memory
from tests.factories import ArticleFactory
from tests.memory.conftest import embed_pending, heavy_db, recall, remember

pytestmark = heavy_db

TEXTS = [f"deploy pipeline step {n} for service {n % 3}" for n in range(7)]


class TargetModel:
    """ "hashing:v2": the hashing vectors turned around. Cosine order is the same, the stored vectors are not,
    so a test can tell which model made a row's vector. Fails every call after `fail_after` calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.fail_after: int | None = None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise embedders.EmbeddingProviderError(503)
        return [[-x for x in vector] for vector in embedders.HashingEmbedder().embed(texts)]


@pytest.fixture
def target(monkeypatch):
    model = TargetModel()
    monkeypatch.setitem(
        embedders.PROVIDERS, "hashing", lambda spec: model if spec.model == "v2" else embedders.HashingEmbedder()
    )
    return model


@pytest.fixture
def corpus(agent, tenant):
    for text in TEXTS:
        remember(agent, text)
    embed_pending()


def _reembed(capsys: Any, *extra: str) -> dict[str, Any]:
    capsys.readouterr()
    call_command("reembed", "--tenant", "acme", "--provider", "hashing", "--model", "v2", "--json", *extra)
    summary: dict[str, Any] = json.loads(capsys.readouterr().out)
    return summary


def _ids(body: dict[str, Any]) -> list[str]:
    return [hit["memory"]["id"] for hit in body["data"]]


def _v2(text: str) -> list[float]:
    return [-x for x in embedders.HashingEmbedder().embed([text])[0]]


def test_recall_answers_the_same_with_the_old_model_during_a_half_done_reembed(agent, tenant, corpus, target, capsys):
    before = recall(agent, "deploy pipeline service 1", limit=5)
    target.fail_after = 2  # batches of 2: four rows get their new vector, then the provider goes down
    summary = _reembed(capsys, "--batch-size", "2")
    assert summary["swapped"] is False
    assert summary["tables"]["memories"]["embedded"] == 4
    assert Memory.objects.exclude(pending_embedding=None).count() == 4
    assert set(Memory.objects.values_list("embedding_model", flat=True)) == {"hashing:v1"}
    during = recall(agent, "deploy pipeline service 1", limit=5)
    assert len(_ids(before)) == 5
    assert _ids(during) == _ids(before)
    assert embedders.spec_for(Tenant.objects.get(id=tenant.id)).model_id == "hashing:v1"


def test_a_rerun_after_a_crash_continues_and_the_swap_moves_recall_to_the_new_model(
    agent, tenant, corpus, target, capsys
):
    before = recall(agent, "deploy pipeline service 1", limit=5)
    target.fail_after = 1
    _reembed(capsys, "--batch-size", "3")
    calls_before_rerun = target.calls
    target.fail_after = None
    summary = _reembed(capsys, "--batch-size", "3")
    # The rerun embeds only what the crash left: 7 rows, 3 kept, 4 left → two batches of 3 and 1.
    assert target.calls - calls_before_rerun == 2
    assert (summary["swapped"], summary["swapped_rows"]["memories"]) == (True, len(TEXTS))
    assert embedders.spec_for(Tenant.objects.get(id=tenant.id)).model_id == "hashing:v2"
    for memory in Memory.objects.all():
        assert memory.embedding_model == "hashing:v2"
        assert list(memory.embedding) == pytest.approx(_v2(memory.text), rel=1e-3, abs=1e-6)  # stored in half precision
        assert (memory.pending_embedding, memory.pending_embedding_model) == (None, "")
    after = recall(agent, "deploy pipeline service 1", limit=5)
    assert _ids(after) == _ids(before)
    assert target.calls > calls_before_rerun + 2  # the query itself was embedded with the new model


def test_a_write_made_mid_reembed_is_embedded_by_the_swap(agent, tenant, corpus, target):
    spec = embedders.spec_of(provider="hashing", model="v2")
    assert reembed_pending(MEMORY_EMBEDDINGS, tenant=tenant, target=spec).complete
    late = remember(agent, "written while the reembed ran")
    embed_pending()  # its own task embeds it with the tenant's current (old) model
    assert Memory.objects.get(id=late["id"]).embedding_model == "hashing:v1"

    def switch() -> None:
        tenant_set_provider(tenant=tenant, embedding="hashing", embedding_model="v2")

    swapped = reembed_swap([MEMORY_EMBEDDINGS], tenant=tenant, target=spec, switch_tenant=switch)
    assert swapped == {"memories": len(TEXTS) + 1}
    row = Memory.objects.get(id=late["id"])
    assert row.embedding_model == "hashing:v2"
    assert list(row.embedding) == pytest.approx(_v2(row.text), rel=1e-3, abs=1e-6)  # stored in half precision


def test_a_failing_swap_changes_nothing(agent, tenant, corpus, target):
    spec = embedders.spec_of(provider="hashing", model="v2")
    reembed_pending(MEMORY_EMBEDDINGS, tenant=tenant, target=spec)
    remember(agent, "a straggler the provider cannot embed")
    target.fail_after = target.calls

    with pytest.raises(embedders.EmbeddingFailure):
        reembed_swap([MEMORY_EMBEDDINGS], tenant=tenant, target=spec, switch_tenant=lambda: None)
    assert set(Memory.objects.exclude(embedding=None).values_list("embedding_model", flat=True)) == {"hashing:v1"}
    assert Memory.objects.exclude(pending_embedding=None).count() == len(TEXTS)


def test_articles_move_with_the_memories_and_an_edited_article_is_reembedded_at_the_swap(tenant, corpus, target):
    article = ArticleFactory.create(tenant=tenant, title="Runbook", body="step one")
    ARTICLE_EMBEDDINGS.store(article, embedders.HashingEmbedder().embed([article.embedding_text])[0], "hashing:v1")
    spec = embedders.spec_of(provider="hashing", model="v2")
    reembed_pending(ARTICLE_EMBEDDINGS, tenant=tenant, target=spec)
    Article.objects.filter(id=article.id).update(body="step two")  # edited after its pending vector was made
    reembed_swap([ARTICLE_EMBEDDINGS], tenant=tenant, target=spec, switch_tenant=lambda: None)
    row = Article.objects.get(id=article.id)
    assert row.embedding_model == "hashing:v2"
    assert row.embedding_content_hash == embedders.content_hash(row.embedding_text)
    assert list(row.embedding) == pytest.approx(_v2(row.embedding_text), rel=1e-3, abs=1e-6)  # stored in half precision


def test_dry_run_names_the_work_and_changes_nothing(tenant, corpus, target, capsys):
    summary = _reembed(capsys, "--dry-run")
    assert (summary["dry_run"], summary["model"], summary["to_embed"]["memories"]) == (True, "hashing:v2", 7)
    assert target.calls == 0
    assert Memory.objects.exclude(pending_embedding=None).count() == 0
