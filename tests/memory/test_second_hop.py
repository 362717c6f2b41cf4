"""Deep recall (memory.second_hop): the best hybrid hits' terms find the memories that complete them."""

from __future__ import annotations

import pytest

from memory.models import Memory
from memory.selectors import RecallHit, RecallResult
from recall.services import _memory_selection_reason
from tests.memory.conftest import embed_pending, heavy_db, read_through, recall, remember

pytestmark = heavy_db

QUERY = "Which office does Amara's hiring manager's replacement work from?"


@pytest.fixture
def chain(agent):
    """A three-part answer: the first two parts share words with the question; the third shares two names with the
    second and fewer of the question's words than eight fillers."""
    first = remember(agent, "Amara's hiring manager was Joost Verhoeven.")
    second = remember(agent, "Since March, Tariq Haddad has replaced Joost Verhoeven.")
    third = remember(agent, "Tariq Haddad works in the Lisbon office.")
    for n, place in enumerate(["Berlin", "Paris", "Oslo", "Rome", "Turin", "Lyon", "Graz", "Bern"]):
        remember(agent, f"The {place} office works, {n}.")
    embed_pending()
    return first["id"], second["id"], third["id"]


def _ids(body):
    return [hit["memory"]["id"] for hit in body["data"]]


def test_deep_recall_lifts_the_memory_that_completes_the_first_hits(agent, chain):
    first, second, third = chain
    hybrid = _ids(recall(agent, QUERY, mode="hybrid", limit=11))
    assert hybrid[:2] == [first, second]
    assert hybrid[-1] == third  # it holds fewer of the question's words than any filler
    body = recall(agent, QUERY, mode="deep", limit=11)
    deep = _ids(body)
    # Lifted by the names it shares with the second hit over every filler but the seeds (the best four hits).
    assert deep[:2] == [first, second]
    assert deep.index(third) < 5
    assert body["meta"]["mode"] == "deep"
    assert body["meta"]["lane_counts"]["hop"] >= 3
    scores = [hit["score"] for hit in body["data"]]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= score <= 1.0 for score in scores)
    # Scaled so that the top hit keeps hybrid's top score; each hit says how much of the seeds' terms it holds.
    assert scores[0] == pytest.approx(recall(agent, QUERY, mode="hybrid")["data"][0]["score"])
    assert body["data"][deep.index(third)]["scores"]["hop"] > 0
    assert all(0.0 <= hit["scores"]["hop"] <= 1.0 for hit in body["data"])


@pytest.mark.parametrize("read", ["exact_scan", "lane_by_lane"])
def test_every_read_shape_ranks_deep_recall_alike(agent, chain, read, monkeypatch, settings):
    def page():
        return [(hit["memory"]["id"], round(hit["score"], 9)) for hit in recall(agent, QUERY, mode="deep")["data"]]

    whole = page()
    read_through(read, monkeypatch, settings)
    assert page() == whole


def test_the_hop_reads_only_the_callers_memories(agent, chain, client_for, make_key, tenant, other_tenant):
    # Others hold the seeds' names too; a hop that crossed the scope would bring them in.
    for outsider in (
        client_for(make_key("agent", tenant, agent_id="agent-b")),
        client_for(make_key("agent", other_tenant, agent_id="agent-a")),
    ):
        remember(outsider, "Tariq Haddad and Joost Verhoeven moved to the Lisbon office.")
    embed_pending()
    body = recall(agent, QUERY, mode="deep", limit=50)
    assert len(body["data"]) == 11  # every memory of agent-a, and only those
    assert not any("moved to the Lisbon" in hit["memory"]["text"] for hit in body["data"])
    # The hop ranked agent-a's rows only: the outsiders' rows hold more of the seeds' names than the fillers do.
    assert body["meta"]["lane_counts"]["hop"] <= 11
    linked = {hit["memory"]["id"] for hit in body["data"] if hit["scores"]["hop"] > 0}
    assert linked <= {hit["memory"]["id"] for hit in body["data"]}


def test_without_seed_terms_deep_is_hybrid(agent):
    # A subject with one memory: its only seed holds nothing but the query's own words, so there is no hop.
    remember(agent, "office work")
    embed_pending()
    hybrid, deep = (recall(agent, "office work", mode=mode) for mode in ("hybrid", "deep"))
    assert [(h["memory"]["id"], h["score"]) for h in deep["data"]] == [
        (h["memory"]["id"], h["score"]) for h in hybrid["data"]
    ]
    assert deep["meta"]["lane_counts"]["hop"] == 0


def test_deep_gives_the_answer_confidence_of_hybrids_fusion(agent):
    # Twelve alike notes: nothing stands out. The hop would lift its seeds by their own words and make one seem to.
    for n, word in enumerate(
        ["apple", "birch", "cedar", "daisy", "elder", "fern", "gorse", "hazel", "iris", "juniper", "kale", "lilac"]
    ):
        remember(agent, f"office note {n} about {word}")
    embed_pending()
    hybrid, deep = (recall(agent, "office note", mode=mode)["meta"] for mode in ("hybrid", "deep"))
    assert hybrid["answer_confidence"] == "low"
    assert deep["answer_confidence"] == "low"
    assert deep["lane_counts"]["hop"] > 0


@pytest.mark.parametrize(
    ("semantic", "keyword", "hop", "reason"),
    [
        (None, None, 0.4, "second_hop"),  # not embedded yet, none of the query's words: only the hop linked it
        (None, None, 0.0, "session_context"),
        (0.3, None, 0.4, "semantic"),
        (0.3, 0.5, 0.4, "keyword+semantic"),
    ],
)
def test_merged_recall_names_the_hop_when_it_alone_brought_a_memory(semantic, keyword, hop, reason):
    hit = RecallHit(memory=Memory(text="x"), score=0.1, semantic=semantic, keyword=keyword, hop=hop)
    assert _memory_selection_reason(hit, RecallResult(hits=[hit], k=10, mode="deep")) == reason
