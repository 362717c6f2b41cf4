"""Recall and list filters: applied inside the scoped read (exact, ANN and fallback paths alike), never a post-filter;
every malformed filter is a 422 naming its field; the scope index still leads the plan."""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from loopmem.database import router
from loopmem.embedding import embedders
from loopmem.reads import scoped, where_guard
from loopmem.tenancy.scope import Scope
from memory import selectors
from memory.filters import MemoryFilters
from memory.models import Memory
from memory.services import memory_remember
from tests.memory.conftest import embed_pending, heavy_db, recall

pytestmark = heavy_db

ROWS = 40
BASE = datetime(2025, 1, 1, tzinfo=UTC)
TAGS: tuple[list[str], ...] = ([], ["a"], ["a", "b"], ["b"], ["c"])
METADATA: tuple[dict[str, Any], ...] = ({"lang": "py"}, {"lang": "go", "tier": 1}, {})
SOURCES = ("explicit", "explicit", "promoted", "imported")


def _row(i: int) -> dict[str, Any]:
    # One row in five names the day it is about; the others are about the day they were written.
    named = date(2024, 6, i % 28 + 1) if i % 5 == 0 else None
    return {
        "text": f"fact {i} about the deploy pipeline" + (f", shipped {named.isoformat()}" if named else ""),
        "event_day": named or (BASE + timedelta(hours=i)).date(),
        "tags": TAGS[i % len(TAGS)],
        "metadata": METADATA[i % len(METADATA)],
        "source": SOURCES[i % len(SOURCES)],
        "confidence": round(i / ROWS, 3),
        "inserted_at": BASE + timedelta(hours=i),
    }


EXPECTED = {i: _row(i) for i in range(ROWS)}

AFTER = BASE + timedelta(hours=29)
BEFORE = BASE + timedelta(hours=35)


def _combined(r: dict[str, Any]) -> bool:
    return (
        "a" in r["tags"] and r["metadata"].get("lang") == "py" and r["confidence"] >= 0.2 and r["inserted_at"] < BEFORE
    )


# (name, wire filters, which rows match)
CASES: list[tuple[str, dict[str, Any], Any]] = [
    ("tags", {"tags": ["a"]}, lambda r: "a" in r["tags"]),
    ("tags all", {"tags": ["a", "b"]}, lambda r: {"a", "b"} <= set(r["tags"])),
    ("tags_any", {"tags_any": ["b", "c"]}, lambda r: bool({"b", "c"} & set(r["tags"]))),
    ("metadata", {"metadata": {"lang": "py"}}, lambda r: r["metadata"].get("lang") == "py"),
    ("metadata nested", {"metadata": {"lang": "go", "tier": 1}}, lambda r: r["metadata"] == {"lang": "go", "tier": 1}),
    ("source", {"source": "promoted"}, lambda r: r["source"] == "promoted"),
    ("created_after", {"created_after": AFTER.isoformat()}, lambda r: r["inserted_at"] > AFTER),
    (
        "created_before",
        {"created_before": "2025-01-01T05:00:00"},
        lambda r: r["inserted_at"] < BASE + timedelta(hours=5),
    ),
    ("created_before date", {"created_before": "2025-01-02"}, lambda r: r["inserted_at"] < BASE + timedelta(days=1)),
    ("min_confidence", {"min_confidence": 0.8}, lambda r: r["confidence"] >= 0.8),
    ("occurred_after", {"occurred_after": "2025-01-01"}, lambda r: r["event_day"] > date(2025, 1, 1)),
    ("occurred_before", {"occurred_before": "2025-01-01"}, lambda r: r["event_day"] < date(2025, 1, 1)),
    (
        "occurred between",
        {"occurred_after": "2024-06-10", "occurred_before": "2025-01-02T12:00:00+05:00"},
        lambda r: date(2024, 6, 10) < r["event_day"] < date(2025, 1, 2),
    ),
    (
        "combined",
        {"tags": ["a"], "metadata": {"lang": "py"}, "min_confidence": 0.2, "created_before": BEFORE.isoformat()},
        _combined,
    ),
    ("nothing matches", {"tags": ["a"], "tags_any": ["c"]}, lambda r: False),
]


@pytest.fixture
def corpus(agent, tenant):
    """ROWS memories of agent-a with every filterable field varied, embedded; plus a look-alike of another subject."""
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    ids = {}
    for i, row in EXPECTED.items():
        memory = memory_remember(
            scope=scope, text=row["text"], tags=row["tags"], metadata=row["metadata"], confidence=row["confidence"]
        )
        Memory.objects.filter(id=memory.id).update(source=row["source"], inserted_at=row["inserted_at"])
        ids[str(memory.id)] = i
    # Another subject holds rows matching every filter: they must never appear. Their texts differ from agent-a's:
    # identical vectors would share one HNSW graph element, and the ANN path could miss one of agent-a's rows.
    other = Scope(tenant_id=tenant.id, subject_id="agent-b")
    for i in range(10):
        memory_remember(
            scope=other,
            text=f"fact {i} about the deploy pipeline, as agent b saw it",
            tags=["a", "b", "c"],
            metadata={"lang": "py"},
        )
    embed_pending()
    return ids


def _expected(ids: dict[str, int], matches: Any) -> set[str]:
    return {memory_id for memory_id, i in ids.items() if matches(EXPECTED[i])}


def _found(body: dict[str, Any]) -> set[str]:
    return {hit["memory"]["id"] for hit in body["data"]}


def test_every_filter_alone_and_combined_on_the_exact_path(agent, corpus):
    for name, wire, matches in CASES:
        body = recall(agent, "deploy pipeline", limit=100, **wire)
        expected = _expected(corpus, matches)
        assert _found(body) == expected, name
        assert body["meta"]["recall_path"] == "exact", name
        assert body["meta"]["outcome"] == ("success" if expected else "empty"), name


@pytest.fixture
def hnsw_only(monkeypatch):
    """Force the HNSW index to answer the ANN read (on a table this small the planner would sort exactly)."""
    configure = scoped.ScopedSession.configure

    def index_only(self, options):
        applied = configure(self, options)
        with connections[router.HEAVY_READ_ALIAS].cursor() as cursor:
            for knob in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
                cursor.execute("SELECT set_config(%s, 'off', true)", [knob])
        return applied

    monkeypatch.setattr(scoped.ScopedSession, "configure", index_only)


@pytest.fixture
def ann_reads(monkeypatch):
    """What each HNSW read returned, in order (memory ids), before any verified fill."""
    reads: list[set[str]] = []
    ann = selectors._VectorRead.ann

    def recorded(self, pool):
        rows = ann(self, pool)
        reads.append({str(row.id) for row in rows})
        return rows

    monkeypatch.setattr(selectors._VectorRead, "ann", recorded)
    return reads


@override_settings(RECALL_EXACT_MAX_ROWS=5)
def test_every_filter_alone_and_combined_on_the_ann_path(agent, corpus, hnsw_only, ann_reads, tenant):
    answered_by_the_index = 0
    for name, wire, matches in CASES:
        ann_reads.clear()
        body = recall(agent, "deploy pipeline", limit=100, **wire)
        expected = _expected(corpus, matches)
        assert _found(body) == expected, name
        assert body["meta"]["outcome"] == ("success" if expected else "empty"), name
        # The HNSW read ran with the filter inside it: everything it returned matches. HNSW is approximate (on
        # near-equidistant vectors a row can be unreachable in the graph); a short read is filled by the exact
        # read, and the meta says which read answered.
        [read] = ann_reads
        assert read <= expected, name
        if read == expected:
            assert body["meta"]["recall_path"] == "ann", name
            answered_by_the_index += 1
        else:
            assert body["meta"]["recall_path"] == "exact", name
    assert answered_by_the_index > 0
    # The filters sit inside the HNSW index scan itself (an iterative scan with the filter), not after it.
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    plan = _plan_of_recall(scope, MemoryFilters(tags=("a",), metadata={"lang": "py"}), hnsw=True)
    assert "memories_hnsw_384_idx" in plan
    assert re.search(r"Filter: .*tags @> ", plan), plan
    assert "metadata @> " in plan


def test_every_filter_applies_on_the_fallback(agent, corpus, monkeypatch):
    class Down:
        def embed(self, texts):
            raise embedders.EmbeddingTimeout()

    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: Down())
    for name, wire, matches in CASES:
        body = recall(agent, "deploy", limit=100, **wire)
        assert body["meta"]["fallback"] is True
        assert _found(body) == _expected(corpus, matches), name


def test_every_filter_applies_to_the_list(agent, corpus):
    for name, wire, matches in CASES:
        params: dict[str, Any] = {"limit": 200}
        for key, value in wire.items():
            params[key] = ",".join(value) if isinstance(value, list) else value
            if isinstance(value, dict):
                params[key] = json.dumps(value)
        body = agent.get("/api/v1/memory", params).json()
        assert {m["id"] for m in body["data"]} == _expected(corpus, matches), name
        assert body["meta"]["total_count"] == len(_expected(corpus, matches)), name


def test_list_tags_may_be_repeated_parameters(agent, corpus):
    body = agent.get("/api/v1/memory?tags=a&tags=b&limit=200").json()
    assert {m["id"] for m in body["data"]} == _expected(corpus, lambda r: {"a", "b"} <= set(r["tags"]))


def test_merged_recall_filters_its_memory_half(agent, corpus):
    for name, wire, matches in CASES:
        response = agent.post("/api/v1/recall", {"query": "deploy pipeline", "limit": 50, **wire}, format="json")
        assert response.status_code == 200, response.json()
        body = response.json()
        assert _found(body["memory"]) == _expected(corpus, matches), name


def test_filters_combine_with_include_superseded(agent, corpus):
    some = next(memory_id for memory_id, i in corpus.items() if "c" in EXPECTED[i]["tags"])
    response = agent.patch(f"/api/v1/memory/{some}", {"tags": ["z"]}, format="json")
    embed_pending()
    newer = response.json()["data"]["id"]
    live = _found(recall(agent, "deploy pipeline", limit=100, tags=["c"]))
    assert some not in live
    with_old = _found(recall(agent, "deploy pipeline", limit=100, tags=["c"], include_superseded=True))
    assert some in with_old
    assert _found(recall(agent, "deploy pipeline", limit=100, tags=["z"])) == {newer}


def test_an_unknown_source_on_the_list_applies_no_filter(agent, corpus):
    body = agent.get("/api/v1/memory?source=bogus&limit=200").json()
    assert body["meta"]["total_count"] == ROWS


def test_an_empty_filter_result_is_200_empty(agent, corpus):
    body = recall(agent, "deploy pipeline", tags=["no-such-tag"])
    assert (body["data"], body["meta"]["outcome"]) == ([], "empty")
    listed = agent.get("/api/v1/memory?tags=no-such-tag").json()
    assert (listed["data"], listed["meta"]["outcome"]) == ([], "empty")


def test_blank_filters_narrow_nothing(agent, corpus):
    wire: dict[str, Any] = {
        "tags": [],
        "tags_any": None,
        "metadata": {},
        "source": "",
        "created_after": "",
        "min_confidence": None,
    }
    assert len(recall(agent, "deploy pipeline", limit=100, **wire)["data"]) == ROWS


def test_the_filters_are_scoped_reads_for_the_guard(tenant):
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    filters = MemoryFilters(tags=("a",), tags_any=("b",), metadata={"k": 1}, min_confidence=0.1)
    where_guard.assert_scoped(
        selectors._candidates(scope, "hashing:v1", 384, include_superseded=False, filters=filters).query,
        tenant_id=tenant.id,
        subject_id="agent-a",
    )
    assert selectors.memory_list(scope=scope, filters=filters).count() == 0


# --- The plan still starts from the scope -----------------------------------------------------------------


def _vector() -> list[float]:
    [raw] = embedders.HashingEmbedder().embed(["deploy pipeline"])
    return raw


def _plan_of_recall(scope: Scope, filters: MemoryFilters, *, hnsw: bool = False) -> str:
    """EXPLAIN of the kNN query a filtered recall_by_vector actually sent (on the same session settings)."""
    vector = _vector()
    heavy = connections[router.HEAVY_READ_ALIAS]
    with CaptureQueriesContext(heavy) as captured:
        selectors.recall_by_vector(
            scope=scope, vector=vector, model_id="hashing:v1", k=10, filters=filters, path="ann" if hnsw else "exact"
        )
    sent = [q["sql"] for q in captured.captured_queries]
    knn = [sql for sql in sent if "<=>" in sql and "ORDER BY" in sql]
    assert knn, sent
    with transaction.atomic(using=router.HEAVY_READ_ALIAS), heavy.cursor() as cursor:
        for sql in sent:
            if "set_config" in sql:
                cursor.execute(sql)
        cursor.execute(f"EXPLAIN {knn[0]}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
        transaction.set_rollback(True, using=router.HEAVY_READ_ALIAS)
    return plan


@pytest.fixture
def crowded(tenant):
    """200 subjects of 30 rows that share the filter values, and agent-a among them; statistics gathered."""
    vector = _vector()
    rows = [
        Memory(
            tenant=tenant,
            subject_id=f"agent-{s}",
            text=f"row {n} of {s}",
            tags=["a", "b"] if n % 3 else ["c"],
            metadata={"lang": "py"} if n % 2 else {"lang": "go"},
            embedding=vector,
            embedding_model="hashing:v1",
            embedding_content_hash="x",
        )
        for s in ["a", *range(200)]
        for n in range(30)
    ]
    Memory.objects.bulk_create(rows, batch_size=1000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories")


@pytest.mark.parametrize(
    "filters",
    [
        MemoryFilters(tags=("a",)),
        MemoryFilters(tags_any=("c",)),
        MemoryFilters(metadata={"lang": "py"}),
        MemoryFilters(tags=("a", "b"), metadata={"lang": "go"}, min_confidence=0.5, source="explicit"),
    ],
    ids=["tags", "tags_any", "metadata", "combined"],
)
def test_a_filtered_guarded_read_still_starts_from_the_subject_scope(tenant, crowded, filters):
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    plan = _plan_of_recall(scope, filters)
    assert "memories_subject_cover_idx" in plan, plan
    assert re.search(r"Index Cond: \(\(tenant_id = .*\) AND \(\(subject_id\)::text = 'agent-a'", plan), plan
    # And the filtered read is exact and complete among agent-a's matching rows.
    found = selectors.recall_by_vector(scope=scope, vector=_vector(), model_id="hashing:v1", k=100, filters=filters)
    assert len(found.hits) == filters.apply(Memory.objects.for_scope(scope).live()).count()
