"""Event time end to end: resolved at write, kept by a correction, and the time lane of hybrid recall."""

from __future__ import annotations

import json
import random
from datetime import UTC, date, datetime, timedelta

import pytest
from django.utils import timezone

from loopmem.embedding import embedders
from loopmem.tenancy.scope import Scope
from memory import hybrid_lanes
from memory.event_time import DaySpan
from memory.models import Memory
from memory.recall_modes import recall_lanes
from tests.memory.conftest import READ_SHAPES, embed_pending, heavy_db, read_through, recall, remember

pytestmark = heavy_db

MODEL_ID = "hashing:v1"


def test_a_remembered_text_keeps_the_days_it_names_resolved_against_today(agent):
    today = timezone.now().date()
    last_saturday = today - timedelta(days=(today.weekday() - 5) % 7 or 7)
    dated = remember(agent, "Maya brought Pepper home last Saturday; the vet visit is on 2026-04-20.")
    undated = remember(agent, "Maya prefers window seats.")
    assert Memory.objects.get(id=dated["id"]).occurred_on == sorted(
        [DaySpan.day(last_saturday), DaySpan.day(date(2026, 4, 20))]
    )
    assert Memory.objects.get(id=undated["id"]).occurred_on is None
    assert "occurred_on" not in dated  # the memory object on the wire is the reference's


def test_a_correction_that_keeps_the_words_keeps_the_day_they_were_said(agent):
    written = remember(agent, "I handed in my notice last Friday.")
    said = datetime(2026, 1, 12, 9, tzinfo=UTC)  # a Monday
    Memory.objects.filter(id=written["id"]).update(inserted_at=said)
    response = agent.patch(f"/api/v1/memory/{written['id']}", {"tags": ["career"]}, format="json")
    assert response.status_code == 200, response.json()
    new = Memory.objects.get(id=response.json()["data"]["id"])
    assert new.occurred_on == [DaySpan.day(date(2026, 1, 9))]


@pytest.fixture
def diary(agent):
    for text in (
        "The summer party at Kestrel is on 3 July 2026, Kenji is invited.",
        "Kestrel Dynamics moved its office to Leeds.",
        "Kestrel Dynamics hires two analysts this quarter.",
        "The budget review at Kestrel Dynamics happens every quarter.",
        "Kenji started at Kestrel Dynamics on 2026-02-02.",
    ):
        remember(agent, text)
    embed_pending()


def test_a_query_that_names_a_day_ranks_the_memory_of_that_day_first(agent, diary):
    body = recall(agent, "What is happening at Kestrel Dynamics on 2026-07-03?", mode="hybrid")
    top = body["data"][0]
    assert top["memory"]["text"].startswith("The summer party at Kestrel is on 3 July 2026")
    assert top["scores"]["time"] == 1.0
    assert body["meta"]["asked_days"] == [{"start": "2026-07-03", "end": "2026-07-04"}]
    assert body["meta"]["lane_counts"]["time"] >= 1
    # A row that shares no day with the question scores 0 in the time lane, not null: the lane ran.
    assert {hit["scores"]["time"] for hit in body["data"][1:]} == {0.0}


def test_a_query_that_names_no_day_has_no_time_lane(agent, diary):
    body = recall(agent, "What is happening at Kestrel Dynamics?", mode="hybrid")
    assert "asked_days" not in body["meta"]
    assert "time" not in body["meta"]["lane_counts"]
    assert all("time" not in hit["scores"] for hit in body["data"])


def test_a_memory_that_names_no_day_is_about_the_day_it_was_written(agent, tenant):
    remember(agent, "Deployed the new billing service.")
    embed_pending()
    Memory.objects.update(inserted_at=datetime(2026, 3, 16, 9, tzinfo=UTC))
    body = recall(agent, "What happened on 2026-03-16?", mode="hybrid")
    assert body["data"][0]["scores"]["time"] == 1.0


def test_the_three_reads_rank_a_time_query_alike(agent, tenant, monkeypatch, settings):
    """Whole-set, one-statement and lane-by-lane reads give the same page with the time lane, context included."""
    rng = random.Random(11)
    days = [f"2026-0{m}-1{d}" for m in range(1, 4) for d in range(0, 4)]
    for n in range(48):  # under the test settings' quota of 50
        words = " ".join(rng.sample(["alpha", "bravo", "charlie", "delta", "echo", "fox"], 2))
        remember(agent, f"{words} note {n} on {rng.choice(days)}", source_session_id=f"s{n % 4}")
    embed_pending()
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    query = "alpha notes from 2026-02-11"
    [vector] = embedders.HashingEmbedder().embed([query])
    embedding = embedders.QueryEmbedding(vector=vector, model_id=MODEL_ID)

    def ranking():
        result = recall_lanes(
            scope=scope, query=query, k=10, include_superseded=False, mode="hybrid", embedding=embedding
        )
        page = [(hit.memory.id, round(hit.score or 0.0, 9), hit.time) for hit in result.hits]
        return page, result.lane_counts

    whole = ranking()
    assert whole[1]["time"] > 0
    assert any(time == 1.0 for _, _, time in whole[0])
    monkeypatch.setattr(hybrid_lanes, "SMALL_SET", 0)
    assert ranking() == whole
    settings.RECALL_EXACT_MAX_ROWS = 1
    assert ranking() == whole


@pytest.mark.parametrize(
    ("inserted_at", "expected"),
    [
        ("2026-01-12T09:00:00Z", [DaySpan.day(date(2026, 1, 9))]),  # the Friday before the export's day
        ("2026-01-12T23:30:00-05:00", [DaySpan.day(date(2026, 1, 9))]),  # the 13th in UTC, a Tuesday
        ("2026-02-30T10:00:00", None),  # unreadable: counted from the import's day instead
        (12, None),
    ],
)
def test_an_imported_line_counts_its_relative_days_from_when_the_export_says_it_was_written(
    agent, inserted_at, expected
):
    line = {"text": "I handed in my notice last Friday.", "inserted_at": inserted_at}
    response = agent.post("/api/v1/memory/import", json.dumps(line) + "\n", content_type="application/x-ndjson")
    assert response.status_code == 200, response.json()
    occurred = Memory.objects.get(text=line["text"]).occurred_on
    if expected is not None:
        assert occurred == expected
    else:
        today = timezone.now().date()
        assert occurred == [DaySpan.day(today - timedelta(days=(today.weekday() - 4) % 7 or 7))]


@pytest.mark.parametrize("read", READ_SHAPES)
def test_the_time_lane_reads_only_the_callers_memories(
    agent, client_for, make_key, tenant, other_tenant, read, monkeypatch, settings
):
    outsiders = [
        client_for(make_key("agent", tenant, agent_id="agent-b")),
        client_for(make_key("agent", other_tenant, agent_id="agent-a")),
    ]
    for outsider in outsiders:
        remember(outsider, "The launch party is on 2026-07-03.")
    mine = remember(agent, "Dentist appointment on 3 July 2026.")
    embed_pending()
    read_through(read, monkeypatch, settings)
    body = recall(agent, "what is on 2026-07-03", mode="hybrid")
    assert [hit["memory"]["id"] for hit in body["data"]] == [mine["id"]]
    assert body["meta"]["lane_counts"]["time"] == 1
