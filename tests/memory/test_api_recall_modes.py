"""POST /api/v1/memory/recall with `mode`: keyword and hybrid envelopes, read-your-writes, degradation, validation;
questions ranked at their share in every read shape."""

from __future__ import annotations

import uuid

import pytest

from loopmem.embedding import embedders
from loopmem.errors import InvalidProjectId
from loopmem.reads import scoped
from loopmem.tenancy.scope import Scope
from loopmem.tenancy.services import tenant_set_provider
from memory import hybrid_lanes, keyword_lane
from memory.candidates import CandidateSet
from memory.models import Memory
from tests.conftest import error
from tests.factories import ProjectFactory
from tests.memory.conftest import READ_SHAPES, embed_pending, heavy_db, read_through, recall, remember

pytestmark = heavy_db


def _texts(body):
    return [hit["memory"]["text"] for hit in body["data"]]


@pytest.fixture
def notes(agent):
    for text in (
        "the deploy pipeline runs on friday evenings",
        "Caroline reviews every database migration before release",
        "deploy-prod.yaml pins the runner image to version 4.2",
    ):
        remember(agent, text)
    embed_pending()


def test_keyword_mode_ranks_by_the_words_typed_and_says_so(agent, notes):
    body = recall(agent, "who reviews the database migration", mode="keyword")
    assert _texts(body) == ["Caroline reviews every database migration before release"]
    [hit] = body["data"]
    assert set(hit) == {"memory", "score", "scores"}
    assert hit["scores"] == {"semantic": None, "keyword": hit["score"]}
    assert hit["score"] == pytest.approx(1.0)  # every term of the query is in the memory
    assert body["meta"] == {
        "total_count": 1,
        "fallback": False,
        "reason": None,
        "underfilled": True,
        "mode": "keyword",
        "lane_counts": {"keyword": 1},
        "answer_confidence": "low",  # a single hit: nothing to separate it from
        "outcome": "success",
    }


def test_hybrid_mode_fuses_both_lanes_with_each_lanes_figure(agent, notes):
    body = recall(agent, "deploy pipeline", mode="hybrid")
    top = body["data"][0]
    assert top["memory"]["text"] == "the deploy pipeline runs on friday evenings"
    assert top["scores"]["semantic"] > 0
    assert top["scores"]["keyword"] == pytest.approx(1.0)
    scores = [hit["score"] for hit in body["data"]]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)
    # A row only the semantic lane scored carries keyword: null.
    assert any(hit["scores"]["keyword"] is None for hit in body["data"])
    meta = body["meta"]
    assert meta == {
        "total_count": 3,
        "fallback": False,
        "reason": None,
        "underfilled": True,
        "recall_path": "exact",
        "mode": "hybrid",
        "lane_counts": {"semantic": 3, "keyword": 1},  # deploy-prod.yaml is one word, not "deploy"
        "answer_confidence": meta["answer_confidence"],
        "outcome": "success",
    }
    assert meta["answer_confidence"] in ("high", "medium", "low")


def test_keyword_mode_on_an_empty_scope_has_no_answer(agent):
    meta = recall(agent, "anything at all", mode="keyword")["meta"]
    assert (meta["total_count"], meta["answer_confidence"], meta["outcome"]) == (0, "none", "empty")


def test_a_query_of_stop_words_matches_nothing_in_keyword_mode(agent, notes):
    assert recall(agent, "the of and it", mode="keyword")["data"] == []


@pytest.mark.parametrize(
    ("memories", "query"),
    [
        (
            [
                "On Friday everyone opening Grafana got a certificate error because grafana.harbor.internal had "
                "expired, tracked as INC-2324",
                "INC-2323 was the disk filling up on the build agents",
                "INC-2325: the pager rota had a gap on Sunday",
                "Grafana dashboards load slowly on Mondays",
                "The incident review for INC-2320 is on Thursday",
            ],
            "INC-2324",
        ),
        (
            [
                "It's PR #212, Migrate pantry-web from CRA to Vite 5, Vitest and React 18",
                "PR #211 fixed the flaky login test",
                "PR #213 bumps eslint",
                "The pantry-web build takes 41 seconds with Vite",
                "Review PR #210 before Friday",
            ],
            "PR #212",
        ),
    ],
)
def test_an_identifier_the_small_embedder_misses_is_found_first_by_hybrid(agent, tenant, memories, query):
    tenant_set_provider(tenant=tenant, embedding="local", embedding_model="")  # the real MiniLM embedder
    for text in memories:
        remember(agent, text)
    embed_pending()
    assert _texts(recall(agent, query))[0] != memories[0]  # semantic ranks a sibling identifier first
    assert _texts(recall(agent, query, mode="hybrid"))[0] == memories[0]


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_memory_is_recallable_the_moment_it_is_written(agent, notes, mode):
    """Read-your-writes: no worker runs in the test suite, so the new row is not embedded when recalled."""
    written = remember(agent, "the staging database password rotates every ninety days")
    assert Memory.objects.get(id=written["id"]).embedding is None
    body = recall(agent, "when does the staging database password rotate", mode=mode)
    assert body["data"][0]["memory"]["id"] == written["id"]
    assert body["data"][0]["scores"]["semantic"] is None
    # Semantic recall cannot see it until it is embedded.
    assert written["id"] not in [hit["memory"]["id"] for hit in recall(agent, "staging database password")["data"]]


class Unavailable:
    def embed(self, texts):
        raise embedders.EmbeddingTimeout()


def test_hybrid_without_an_embedding_is_the_keyword_lane_with_the_reason(agent, notes, monkeypatch):
    keyword = recall(agent, "deploy pipeline friday", mode="keyword")
    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: Unavailable())
    degraded = recall(agent, "deploy pipeline friday", mode="hybrid")
    assert degraded["data"] == keyword["data"]
    assert degraded["meta"] == {
        **keyword["meta"],
        "fallback": True,
        "reason": "embedding_timeout",
        "mode": "hybrid",
        "lane_lost": "semantic",
        "outcome": "fallback",
    }


def test_keyword_mode_never_embeds_the_query(agent, notes, monkeypatch):
    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: Unavailable())
    meta = recall(agent, "deploy pipeline", mode="keyword")["meta"]
    assert (meta["fallback"], meta["reason"], meta["outcome"]) == (False, None, "success")


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_superseded_rows_are_hidden_unless_asked_for(agent, mode):
    old = remember(agent, "the cat eats fish")
    new = remember(agent, "the cat eats chicken now")
    embed_pending()
    Memory.objects.filter(id=old["id"]).update(superseded_by_id=new["id"])
    assert _texts(recall(agent, "cat eats fish", mode=mode)) == ["the cat eats chicken now"]
    both = recall(agent, "cat eats fish", mode=mode, include_superseded=True)
    assert _texts(both)[0] == "the cat eats fish"
    assert set(_texts(both)) == {"the cat eats fish", "the cat eats chicken now"}


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_project_partition_global_plus_the_named_project(agent, tenant, mode):
    alpha, beta = ProjectFactory.create(tenant=tenant), ProjectFactory.create(tenant=tenant)
    remember(agent, "deploy global")
    remember(agent, "deploy alpha", project_id=str(alpha.id))
    remember(agent, "deploy beta", project_id=str(beta.id))
    embed_pending()
    assert set(_texts(recall(agent, "deploy", mode=mode))) == {"deploy global"}
    assert set(_texts(recall(agent, "deploy", mode=mode, project_id=str(alpha.id)))) == {
        "deploy global",
        "deploy alpha",
    }


@pytest.mark.parametrize(("limit", "k"), [(0, 1), (3, 3), (1000, 12)])
@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_limit_is_clamped_like_semantic_recall(agent, mode, limit, k):
    for n in range(12):
        remember(agent, f"note number {n}")
    embed_pending()
    assert recall(agent, "note number", mode=mode, limit=limit)["meta"]["total_count"] == k


@pytest.mark.parametrize("mode", [None, ""])
def test_a_null_or_empty_mode_is_semantic(agent, notes, mode):
    assert "mode" not in recall(agent, "deploy", mode=mode)["meta"]


@pytest.mark.parametrize("mode", ["bogus", "HYBRID", 1, True, ["hybrid"], {"mode": "hybrid"}])
def test_an_unknown_mode_is_422(agent, mode):
    response = agent.post("/api/v1/memory/recall", {"query": "x", "mode": mode}, format="json")
    assert response.status_code == 422
    assert response.json() == error(
        422, "validation_failed", "Validation failed", {"mode": ["must be one of semantic, keyword, hybrid, deep"]}
    )


def test_project_id_is_checked_before_the_mode(agent):
    response = agent.post("/api/v1/memory/recall", {"query": "x", "mode": "bogus", "project_id": "no"}, format="json")
    assert response.status_code == 422
    assert response.json() == error(422, "invalid_project_id", InvalidProjectId.default_message)


def test_a_keyword_hit_is_not_a_healthy_semantic_recall_for_graduation(agent):
    # Bumps count semantic similarity only: a row found by its words alone (not embedded yet) is not bumped.
    written = remember(agent, "the release train leaves on tuesdays")
    recall(agent, "release train tuesdays", mode="hybrid")
    assert Memory.objects.get(id=written["id"]).recall_count == 0
    embed_pending()
    recall(agent, "the release train leaves on tuesdays", mode="hybrid")
    assert Memory.objects.get(id=written["id"]).recall_count == 1


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_missing_key_is_401(client_for, mode):
    response = client_for().post("/api/v1/memory/recall", {"query": "x", "mode": mode}, format="json")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


def test_a_reply_inherits_context_from_the_turn_before_it_in_its_session(agent):
    remember(agent, "Who is your boss at Lumen Forge?", source_session_id="s1")
    answer = remember(agent, "Dana Whitfield, the animation director.", source_session_id="s1")
    remember(agent, "The weather in Lisbon was lovely", source_session_id="s2")
    twin = remember(agent, "Dana Whitfield, the animation director.", source_session_id="s2")
    embed_pending()
    ranked = [hit["memory"]["id"] for hit in recall(agent, "boss at Lumen Forge", mode="hybrid")["data"]]
    assert ranked.index(answer["id"]) < ranked.index(twin["id"])
    # Context belongs to hybrid fusion: the keyword lane alone finds only the question.
    assert _texts(recall(agent, "boss at Lumen Forge", mode="keyword")) == ["Who is your boss at Lumen Forge?"]


def test_a_superseded_turn_passes_no_context_on(agent):
    question = remember(agent, "Who is your boss at Lumen Forge?", source_session_id="s1")
    answer = remember(agent, "Dana Whitfield, the animation director.", source_session_id="s1")
    twin = remember(agent, "Dana Whitfield, the animation director.", source_session_id="s2")
    embed_pending()
    Memory.objects.filter(id=question["id"]).update(superseded_by_id=twin["id"])
    scores = {hit["memory"]["id"]: hit["score"] for hit in recall(agent, "boss Lumen Forge", mode="hybrid")["data"]}
    assert scores[answer["id"]] == scores[twin["id"]]


def test_a_row_beyond_one_lanes_pool_is_still_scored_exactly_by_it(agent):
    # 40 rows: the semantic lane keeps its best 20 for k=5; the rare-word row ranks last there but first by keyword.
    for n in range(39):
        remember(agent, f"alpha beta gamma delta note {n}")
    rare = remember(agent, "zeta omega")
    embed_pending()
    body = recall(agent, "alpha beta gamma zeta", mode="hybrid", limit=5)
    assert body["meta"]["lane_counts"] == {"semantic": 20, "keyword": 20}
    hit = next(hit for hit in body["data"] if hit["memory"]["id"] == rare["id"])
    # Filled by an exact read, not taken as "not embedded" (which would judge it by its keyword share alone).
    assert isinstance(hit["scores"]["semantic"], float)
    assert hit["scores"]["semantic"] > 0
    assert hit["score"] < 1.0


def test_a_memory_forgotten_between_the_lanes_and_the_page_load_is_left_out(agent, tenant, notes, monkeypatch):
    # Each lane read is its own statement: a forget can land between the pool and the page's rows.
    from memory import hybrid_lanes

    load_rows = hybrid_lanes.load_rows
    forgotten: list[str] = []

    def forget_one_first(session, candidates, hybrid, ids):
        forgotten.append(str(ids[0]))
        Memory.objects.filter(tenant=tenant, id=ids[0]).delete()
        hybrid.loaded.pop(ids[0], None)
        return load_rows(session, candidates, hybrid, ids)

    monkeypatch.setattr(hybrid_lanes, "load_rows", forget_one_first)
    body = recall(agent, "deploy", mode="hybrid")
    assert forgotten
    assert body["data"]
    assert forgotten[0] not in [hit["memory"]["id"] for hit in body["data"]]


@pytest.mark.parametrize("read", READ_SHAPES)
def test_a_question_is_ranked_at_its_share_and_its_answer_inherits_all_of_it(agent, read, monkeypatch, settings):
    question = remember(agent, "Which office does Dana Whitfield work from?", source_session_id="s1")
    answer = remember(agent, "Lisbon, on the second floor.", source_session_id="s1")
    for n in range(6):
        remember(agent, f"garden note {n}: the tomatoes need water", source_session_id="s2")
    embed_pending()
    read_through(read, monkeypatch, settings)
    hits = {hit["memory"]["id"]: hit for hit in recall(agent, question["text"], mode="hybrid")["data"]}
    share, context = settings.RECALL_HYBRID_QUESTION_SHARE, settings.RECALL_HYBRID_CONTEXT_WEIGHT
    assert share < 1
    # The query is the question's own text: it is the best row of both lanes, its own score 1.
    assert hits[question["id"]]["scores"]["keyword"] == pytest.approx(1.0)
    assert hits[question["id"]]["score"] == pytest.approx(share / (1 + context))
    best_semantic = max(hit["scores"]["semantic"] for hit in hits.values())
    figures = hits[answer["id"]]["scores"]
    own = 0.5 * figures["semantic"] / best_semantic + 0.5 * (figures["keyword"] or 0.0)
    assert hits[answer["id"]]["score"] == pytest.approx((own + context * 1.0) / (1 + context))


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("Where do we keep the spare keys?", True),
        ("Where do we keep the spare keys?  \n", True),  # trailing whitespace aside
        ("鍵はどこですか\uff1f", True),  # full-width
        ("أين المفاتيح؟", True),  # Arabic
        ("Is it the blue drawer? Yes, the blue drawer.", False),  # asked and answered
        ("The keys are in the blue drawer.", False),
    ],
)
def test_a_memory_asks_a_question_when_its_text_ends_with_a_question_mark(agent, text, asks):
    remember(agent, text)
    [flag] = Memory.objects.filter(text=text).annotate(asks=hybrid_lanes.AsksQuestion()).values_list("asks", flat=True)
    assert flag is asks


@pytest.mark.parametrize("read", READ_SHAPES)
def test_a_question_that_joins_only_as_a_successor_is_flagged_in_every_read_shape(
    agent, tenant, read, monkeypatch, settings
):
    # Pools of 2: the question is in neither lane's best two, so only the session context brings it (and its flag).
    remember(agent, "alpha beta gamma delta", source_session_id="s1")
    question = remember(agent, "and what about beta?", source_session_id="s1")
    for n in range(5):
        remember(agent, f"alpha beta gamma filler {n}", source_session_id="s2")
    embed_pending()
    read_through(read, monkeypatch, settings)
    query = "alpha beta gamma delta"
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    [vector] = embedders.HashingEmbedder().embed([query])
    embedding = embedders.QueryEmbedding(vector=vector, model_id=embedders.spec_for(tenant).model_id)
    with scoped.scoped_session(tenant_id=tenant.id, subject_id="agent-a") as session:
        pool = hybrid_lanes.read_pool(
            session,
            candidates=CandidateSet(scope, include_superseded=False),
            terms=keyword_lane.query_terms(query),
            embedding=embedding,
            pool=2,
        )
    question_id = uuid.UUID(question["id"])
    assert question_id in pool.previous  # it came as the successor of a pooled row
    assert question_id in pool.asking
    assert [lane.asks for lane in pool.lanes() if lane.id == question_id] == [True]
