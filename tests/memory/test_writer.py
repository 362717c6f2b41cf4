"""The one writer of long-term rows (memory.writer): a row that brings its vector meets the promoted-content index,
which has the last word on exact duplicates without spoiling the caller's transaction."""

from __future__ import annotations

import pytest
from django.db import transaction

from loopmem.embedding import embedders
from loopmem.embedding.embedders import QueryEmbedding
from loopmem.tenancy.scope import Scope
from memory.models import Memory
from memory.promotion import persist
from memory.promotion.compilers import Candidate
from memory.writer import DuplicatePromotedContent, MemoryDraft, SubjectWriter
from tests.memory.conftest import heavy_db

TEXT = "the staging cluster drains at 18:00 UTC"


@pytest.fixture
def scope(tenant):
    return Scope(tenant_id=tenant.id, subject_id="agent-a")


@pytest.fixture
def live_twin(scope):
    """A live promoted row of TEXT whose vector came after the promotion looked (the embedding takes no lock)."""
    return Memory.objects.create(
        tenant_id=scope.tenant_id,
        subject_id=scope.subject_id,
        text=TEXT,
        source=Memory.Source.PROMOTED,
        embedding_content_hash=embedders.content_hash(TEXT),
    )


def _promoted(text: str) -> MemoryDraft:
    return MemoryDraft(
        text=text, source=Memory.Source.PROMOTED, vector=QueryEmbedding(vector=[1.0] * 384, model_id="m")
    )


@pytest.mark.django_db
def test_a_row_refused_by_the_promoted_content_index_leaves_the_transaction_usable(scope, live_twin):
    with transaction.atomic():
        writer = SubjectWriter(scope)
        with pytest.raises(DuplicatePromotedContent):
            writer.insert(_promoted(TEXT))
        written = writer.insert(_promoted("the production cluster never drains"))
    assert set(Memory.objects.values_list("id", flat=True)) == {live_twin.id, written.id}
    assert Memory.objects.get(id=written.id).embedding_content_hash == embedders.content_hash(written.text)


@heavy_db  # the near-duplicate look reads on the heavy-read alias
def test_promotion_counts_a_candidate_the_index_refused_as_deduplicated(scope, live_twin, monkeypatch):
    # Both looks before the insert miss the twin (as when its vector is stored between them): the index decides.
    monkeypatch.setattr(persist, "_promoted_exists", lambda *_: False)
    summary = persist.promotion_persist(scope=scope, session_id="s-1", candidates=[Candidate(text=TEXT, confidence=1)])
    assert (summary.promoted, summary.superseded, summary.deduped, summary.memory_ids) == (0, 0, 1, [])
    assert list(Memory.objects.values_list("id", flat=True)) == [live_twin.id]
