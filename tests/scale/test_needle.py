"""Scale: a needle subject recalls its own exact top 10 among a multi-subject corpus (reference §7 item 30).

The decoy band (200 foreign rows nearer the needle's query than any needle row) is wider than the reference's
pool and than hnsw.ef_search, so a read that filters the subject only after the index has answered finds nothing.
Size: LOOPMEM_SCALE_ROWS rows (default 10,000, bounded for CI); the reference's size is LOOPMEM_SCALE_ROWS=80000.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections, transaction
from rest_framework.test import APIClient

from bench.scale_corpus import NeedleCorpus, build_needle_corpus, exact_neighbours
from config.env import env_int
from loopmem.database.router import HEAVY_READ_ALIAS
from loopmem.models import Tenant
from loopmem.tenancy.scope import Scope
from loopmem.tenancy.services import api_key_create
from memory.selectors import RecallResult, recall_by_vector
from tests.factories import TenantFactory

pytestmark = [pytest.mark.scale, pytest.mark.django_db(transaction=True, databases=["default", "heavy_read"])]

# Read through the project's one typed env helper; a test size is not a setting of the service.
SCALE_ROWS = env_int("LOOPMEM_SCALE_ROWS", 10_000)
K = 10


@pytest.fixture
def scale_tenant() -> Tenant:
    return TenantFactory.create(name="Scale", slug="scale")


@pytest.fixture
def needle(scale_tenant: Tenant) -> NeedleCorpus:
    return build_needle_corpus(tenant_id=scale_tenant.id, rows=SCALE_ROWS)


def exact_ids(corpus: NeedleCorpus, *, subject_id: str | None = None) -> list[uuid.UUID]:
    found = exact_neighbours(tenant_id=corpus.tenant_id, vector=corpus.query_vector, k=K, subject_id=subject_id)
    return [row.id for row in found]


def recall(corpus: NeedleCorpus, path: str) -> RecallResult:
    scope = Scope(tenant_id=corpus.tenant_id, subject_id=corpus.subject_id)
    return recall_by_vector(scope=scope, vector=corpus.query_vector, model_id=corpus.model_id, k=K, path=path)


def ids(result: RecallResult) -> list[uuid.UUID]:
    return [hit.memory.id for hit in result.hits]


def recall_over_http(corpus: NeedleCorpus, tenant: Tenant) -> dict[str, Any]:
    # The corpus's query vector is the hashing provider's embedding of its query text, so the endpoint embeds
    # the text to exactly the vector the corpus was built around: no real model, no fake.
    issued = api_key_create(role="agent", tenant=tenant, agent_id=corpus.subject_id)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.raw_key}")
    response = client.post("/api/v1/memory/recall", {"query": corpus.query_text, "limit": K}, format="json")
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


@contextlib.contextmanager
def planner_forced_onto_hnsw() -> Iterator[None]:
    # For a 50-row subject the planner prefers the (tenant, subject) btree plus a sort, which is exact. With sorts
    # disabled the HNSW index scan is the only ordered plan left, so the read shows what the index returns. The
    # read's own transaction nests inside this one as a savepoint, so SET LOCAL stays in force for it.
    with transaction.atomic(using=HEAVY_READ_ALIAS):
        with connections[HEAVY_READ_ALIAS].cursor() as cursor:
            cursor.execute("SET LOCAL enable_sort = off")
        yield


def test_the_needle_recalls_its_own_exact_top_10_while_the_global_top_10_are_all_decoys(
    needle: NeedleCorpus, scale_tenant: Tenant
) -> None:
    truth = exact_ids(needle, subject_id=needle.subject_id)
    assert truth == list(needle.needle_top_ids)  # the corpus is what it claims to be

    global_top = exact_neighbours(tenant_id=needle.tenant_id, vector=needle.query_vector, k=K)
    assert {row.id for row in global_top} <= needle.decoy_ids
    assert all(row.subject_id != needle.subject_id for row in global_top)

    # "ann" as the planner runs it: for a 50-row subject it picks the (tenant, subject) btree, which is exact.
    for path in ("auto", "exact", "ann"):
        result = recall(needle, path)
        assert ids(result) == truth, path
        assert not result.underfilled, path
    assert recall(needle, "auto").recall_path == "exact"  # 50 rows: the btree-scoped exact read

    body = recall_over_http(needle, scale_tenant)
    assert [uuid.UUID(hit["memory"]["id"]) for hit in body["data"]] == truth
    assert body["meta"]["underfilled"] is False
    assert body["meta"]["fallback"] is False


def test_post_filtered_hnsw_returns_fewer_of_the_needles_top_10(needle: NeedleCorpus) -> None:
    truth = set(needle.needle_top_ids)
    production = recall(needle, "auto")
    with planner_forced_onto_hnsw():
        post_filtered = recall(needle, "ann_post_filter")

    # The index hands back its ef_search nearest rows, all decoys; the subject filter then leaves none of them.
    assert post_filtered.ann_iterative_scan == "off"
    assert len(truth & set(ids(post_filtered))) < len(truth & set(ids(production))) == K
    assert post_filtered.underfilled
