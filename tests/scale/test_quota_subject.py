"""Scale: a subject at the quota is recalled completely (recall@10 = 1.00 against exact kNN) by every path `auto`
can take, among other subjects' rows nearer to its queries than its own.

Size: LOOPMEM_SCALE_QUOTA_ROWS rows in the subject (default 2,000, bounded for CI; the quota is 10,000), as many
rows again in other subjects built around the same queries. The exact bound is set below the subject's size, so
`auto` takes the ANN read (the subject inside a relaxed iterative scan, verified) and must stay complete.
"""

from __future__ import annotations

import random
import uuid

import pytest
from django.test import override_settings

from bench.scale_corpus import exact_neighbours
from config.env import env_int
from loopmem.embedding import embedders
from loopmem.tenancy.scope import Scope
from memory.models import Memory
from memory.selectors import recall_by_vector
from tests.factories import TenantFactory

pytestmark = [pytest.mark.scale, pytest.mark.django_db(transaction=True, databases=["default", "heavy_read"])]

QUOTA_ROWS = env_int("LOOPMEM_SCALE_QUOTA_ROWS", 2_000)
K = 10
QUERIES = 10
SUBJECT = "quota-full"
MODEL_ID = "hashing:v1"
WORDS = [f"w{n}" for n in range(300)]


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(4, 8)))


def _load(tenant_id: uuid.UUID, subject: str, texts: list[str]) -> None:
    vectors = embedders.HashingEmbedder().embed(texts)
    Memory.objects.bulk_create(
        (
            Memory(
                tenant_id=tenant_id,
                subject_id=subject,
                text=text,
                embedding=vector,
                embedding_model=MODEL_ID,
                embedding_content_hash=str(n),
            )
            for n, (text, vector) in enumerate(zip(texts, vectors, strict=True))
        ),
        batch_size=1_000,
    )


def test_a_quota_size_subject_is_recalled_completely_by_every_path():
    tenant = TenantFactory.create()
    rng = random.Random(20)
    _load(tenant.id, SUBJECT, [_sentence(rng) for _ in range(QUOTA_ROWS)])
    queries = [_sentence(rng) for _ in range(QUERIES)]
    # Dilution: other subjects hold the queries' own words, nearer to every query than most of the subject's rows.
    _load(tenant.id, "neighbour", [f"{q} {_sentence(rng)}" for q in queries for _ in range(QUOTA_ROWS // QUERIES)])
    scope = Scope(tenant_id=tenant.id, subject_id=SUBJECT)
    paths: set[str | None] = set()
    with override_settings(RECALL_EXACT_MAX_ROWS=QUOTA_ROWS // 2):
        for query in queries:
            [vector] = embedders.HashingEmbedder().embed([query])
            truth = [n.id for n in exact_neighbours(tenant_id=tenant.id, vector=vector, k=K, subject_id=SUBJECT)]
            for path in ("auto", "exact", "ann"):
                result = recall_by_vector(scope=scope, vector=vector, model_id=MODEL_ID, k=K, path=path)
                found = [hit.memory.id for hit in result.hits]
                # Ties at the 10th distance may order differently; the distances must not.
                assert len(found) == K, (query, path)
                assert set(found) == set(truth) or _same_distances(tenant.id, vector, found, truth), (query, path)
                if path == "auto":
                    paths.add(result.recall_path)
    assert paths == {"ann"}  # above the exact bound, auto read through the index and stayed complete


def _same_distances(tenant_id: uuid.UUID, vector: list[float], found: list[uuid.UUID], truth: list[uuid.UUID]) -> bool:
    rows = {n.id: n.distance for n in exact_neighbours(tenant_id=tenant_id, vector=vector, k=K * 5, subject_id=SUBJECT)}
    return [round(rows[i], 6) for i in found if i in rows] == [round(rows[i], 6) for i in truth]
