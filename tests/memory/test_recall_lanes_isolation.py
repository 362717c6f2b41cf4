"""Both lanes on the same randomized fixtures: each returns only the scope's rows (subject, tenant, project
partition, superseded rule), and each is complete: every visible row it can score is returned when k allows.
"""

from __future__ import annotations

import random
import re
import uuid
from dataclasses import dataclass

import pytest

from loopmem.embedding import embedders
from loopmem.models import Tenant
from loopmem.reads import scoped
from loopmem.reads.where_guard import UnscopedHeavyRead
from loopmem.tenancy.scope import Scope
from memory import hybrid_lanes, keyword_lane
from memory.candidates import CandidateSet
from memory.models import Memory
from memory.recall_modes import recall_lanes
from memory.selectors import RecallResult, recall_by_vector
from projects.models import Project
from tests.factories import ProjectFactory
from tests.memory.conftest import embed_pending, heavy_db, recall, remember

pytestmark = heavy_db

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
SUBJECTS = ("agent-a", "agent-b")
MODEL_ID = "hashing:v1"
K = 100  # more than any scope holds: every lane must return everything it can score


@dataclass
class World:
    tenants: list[Tenant]
    projects: dict[uuid.UUID, list[Project]]  # tenant id -> its projects
    rows: list[Memory]
    lexemes: dict[uuid.UUID, set[str]]  # each row's lexemes as the database stemmed them


def _build(seed, tenant, other_tenant) -> World:
    rng = random.Random(seed)
    projects = {t.id: [ProjectFactory.create(tenant=t) for _ in range(2)] for t in (tenant, other_tenant)}
    rows: list[Memory] = []
    for _ in range(160):
        owner = rng.choice((tenant, other_tenant))
        rows.append(
            Memory(
                tenant=owner,
                subject_id=rng.choice(SUBJECTS),
                project=rng.choice([None, *projects[owner.id]]),
                text=" ".join(rng.sample(WORDS, rng.randint(2, 5))),
            )
        )
    Memory.objects.bulk_create(rows)
    embedded = [row for row in rows if rng.random() < 0.8]  # the rest wait for the worker (read-your-writes)
    for row in embedded:
        [vector] = embedders.HashingEmbedder().embed([row.text])
        row.embedding, row.embedding_model = vector, MODEL_ID
    Memory.objects.bulk_update(embedded, ["embedding", "embedding_model"])
    for row in rows:
        peers = [r for r in rows if (r.tenant_id, r.subject_id) == (row.tenant_id, row.subject_id) and r is not row]
        if peers and rng.random() < 0.2:
            row.superseded_by = rng.choice(peers)
    Memory.objects.bulk_update(rows, ["superseded_by"])
    # Each row's lexemes as the database stemmed them: what the keyword lane matches on.
    vectors = Memory.objects.filter(id__in=[r.id for r in rows]).values_list("id", "search_vector")
    lexemes = {memory_id: set(re.findall(r"'([^']+)'", vector)) for memory_id, vector in vectors}
    return World(tenants=[tenant, other_tenant], projects=projects, rows=rows, lexemes=lexemes)


def _visible(world: World, scope: Scope, include_superseded: bool) -> list[Memory]:
    return [
        row
        for row in world.rows
        if row.tenant_id == scope.tenant_id
        and row.subject_id == scope.subject_id
        and (row.project_id is None or row.project_id == scope.project_id)
        and (include_superseded or row.superseded_by_id is None)
    ]


def _scopes(world: World):
    first, second = world.tenants
    for tenant in world.tenants:
        foreign = world.projects[(second if tenant is first else first).id][0].id
        for subject in SUBJECTS:
            for project_id in (None, world.projects[tenant.id][0].id, world.projects[tenant.id][1].id, foreign):
                yield Scope(tenant_id=tenant.id, subject_id=subject, project_id=project_id)


def _ids(result: RecallResult) -> set[uuid.UUID]:
    return {hit.memory.id for hit in result.hits}


TIERS = ["whole", "whole_unprepared", "exact_scan", "lane_by_lane"]


def _unprepared(monkeypatch) -> None:
    """Send the reads a typical recall prepares once per shape through the ORM, as a filtered recall's go."""
    monkeypatch.setattr(CandidateSet, "unfiltered", property(lambda self: False))


@pytest.fixture(params=TIERS)
def tier(request, monkeypatch, settings):
    """Force each of hybrid recall's three reads (memory.hybrid_lanes) on these small subjects, the whole-set read
    both prepared and through the ORM."""
    if request.param == "whole_unprepared":
        _unprepared(monkeypatch)
    elif request.param != "whole":
        monkeypatch.setattr(hybrid_lanes, "SMALL_SET", 0)
    if request.param == "lane_by_lane":
        settings.RECALL_EXACT_MAX_ROWS = 1
    return request.param


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_lane_returns_exactly_what_its_scope_may_see(seed, tenant, other_tenant, tier):
    world = _build(seed, tenant, other_tenant)
    rng = random.Random(seed)
    for scope in _scopes(world):
        for include_superseded in (False, True):
            query = " ".join(rng.sample(WORDS, 2))
            terms = set(keyword_lane.query_terms(query))
            visible = _visible(world, scope, include_superseded)
            embedded = {row.id for row in visible if row.embedding_model == MODEL_ID}
            matching = {row.id for row in visible if terms & world.lexemes[row.id]}
            [vector] = embedders.HashingEmbedder().embed([query])
            query_embedding = embedders.QueryEmbedding(vector=vector, model_id=MODEL_ID)
            semantic = recall_by_vector(
                scope=scope,
                vector=query_embedding.vector,
                model_id=MODEL_ID,
                k=K,
                include_superseded=include_superseded,
            )
            keyword = recall_lanes(
                scope=scope, query=query, k=K, include_superseded=include_superseded, mode="keyword", embedding=None
            )
            hybrid = recall_lanes(
                scope=scope,
                query=query,
                k=K,
                include_superseded=include_superseded,
                mode="hybrid",
                embedding=query_embedding,
            )
            context = f"{tier} seed {seed} {scope} include_superseded={include_superseded} query={query!r}"
            assert _ids(semantic) == embedded, context
            assert _ids(keyword) == matching, context
            assert _ids(hybrid) == embedded | matching, context


@pytest.fixture
def secret(client_for, make_key, tenant):
    owner = client_for(make_key("agent", tenant, agent_id="agent-a"))
    remember(owner, "the vault code is 4242", source_session_id="s1")
    remember(owner, "it opens the east door", source_session_id="s1")
    embed_pending()
    return owner


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize("who", ["other_subject", "other_tenant_same_agent_id", "orchestrator_with_agent_id"])
def test_outsiders_recall_nothing_over_http(secret, client_for, make_key, tenant, other_tenant, mode, who):
    outsider = {
        "other_subject": lambda: make_key("agent", tenant, agent_id="agent-b"),
        "other_tenant_same_agent_id": lambda: make_key("agent", other_tenant, agent_id="agent-a"),
        "orchestrator_with_agent_id": lambda: make_key("orchestrator", tenant, agent_id="agent-a"),
    }[who]()
    # The outsider's own session shares the session id: context never crosses the scope either.
    remember(client_for(outsider), "vault code door", source_session_id="s1")
    assert [hit["memory"]["text"] for hit in recall(client_for(outsider), "vault code", mode=mode)["data"]] == [
        "vault code door"
    ]
    owner_sees = [hit["memory"]["text"] for hit in recall(secret, "vault code", mode=mode)["data"]]
    # Keyword: only the row holding the words; hybrid: the semantic lane scores every embedded row of the owner.
    expected = ["the vault code is 4242", "it opens the east door"] if mode == "hybrid" else ["the vault code is 4242"]
    assert owner_sees == expected


def test_the_three_reads_rank_alike(agent, tenant, monkeypatch, settings):
    """Every hybrid read is exact, so the whole-set, scan and lane-by-lane reads agree, session context included."""
    rng = random.Random(7)
    for n in range(48):  # under the test settings' quota of 50
        remember(agent, " ".join(rng.sample(WORDS, 3)) + f" item {n}", source_session_id=f"s{n % 4}")
    embed_pending()
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    [vector] = embedders.HashingEmbedder().embed(["alpha bravo"])
    query_embedding = embedders.QueryEmbedding(vector=vector, model_id=MODEL_ID)

    def ranking():
        result = recall_lanes(
            scope=scope, query="alpha bravo", k=10, include_superseded=False, mode="hybrid", embedding=query_embedding
        )
        return [(hit.memory.id, round(hit.score or 0.0, 9)) for hit in result.hits], result.lane_counts

    whole = ranking()
    with monkeypatch.context() as unprepared:
        _unprepared(unprepared)
        assert ranking() == whole
    monkeypatch.setattr(hybrid_lanes, "SMALL_SET", 0)
    assert ranking() == whole
    settings.RECALL_EXACT_MAX_ROWS = 1
    assert ranking() == whole


def test_a_page_read_by_ids_returns_only_the_sessions_own_rows(tenant, other_tenant):
    """The page is read by id, prepared: ids of another subject's or tenant's memories, or of a superseded one,
    bring nothing, whatever the caller passes."""
    world = _build(4, tenant, other_tenant)
    every_id = [row.id for row in world.rows]
    for scope in _scopes(world):
        for include_superseded in (False, True):
            with scoped.scoped_session(tenant_id=scope.tenant_id, subject_id=scope.subject_id) as session:
                page = hybrid_lanes._prepared_page(session, scope, every_id, include_superseded=include_superseded)
            assert {row.id for row in page} == {row.id for row in _visible(world, scope, include_superseded)}
    mine = Scope(tenant_id=tenant.id, subject_id="agent-a")
    with (
        scoped.scoped_session(tenant_id=tenant.id, subject_id="agent-b") as session,
        pytest.raises(UnscopedHeavyRead),
    ):
        hybrid_lanes._prepared_page(session, mine, every_id, include_superseded=False)
