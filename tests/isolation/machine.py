"""The isolation state machine: every role writes, corrects, forgets, recalls and reads, through the HTTP API
and the MCP tools, while the oracle (`tests/isolation/world.py`) checks after each step that nothing outside
the caller's scope was returned, changed or revealed. Run by `test_stateful_isolation.py`."""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.types import TextContent

from agent.client import LoopmemClient
from agent.mcp_server import build_server
from knowledge.embedding import article_embed
from knowledge.models import Article
from loopmem.embedding import embedders
from loopmem.models import ApiKey
from memory import embedding as memory_embedding
from memory.graduation import memory_graduation_sweep
from memory.models import Memory, PromotionJob, SessionTurn
from memory.promotion import jobs
from tests.isolation import world as w

SESSIONS = ("s1", "s2", "s3")  # the same session ids in every scope: history and context must still not cross
TAGS = ("ops", "db")
MODES = ("semantic", "keyword", "hybrid", "deep")
SEARCH_MODES = ("keyword", "semantic", "combined")
# A 503 with one of these codes is the documented answer of a degraded dependency, not a server error.
DEGRADED_503 = {"embedding_unavailable", "gate_unavailable"}


@dataclass
class Tally:
    """Across every example of a run: what was done and what was checked."""

    operations: int = 0
    checks: int = 0
    steps: int = 0
    examples: int = 0
    mcp_calls: int = 0
    # "POST /api/v1/memory/recall 200", "mcp memory_get 404", "recall fallback", ...: what the run exercised.
    outcomes: Counter[str] = field(default_factory=Counter)


@dataclass
class Answer:
    """A response from either surface: status, body text, and the parsed body."""

    status: int
    text: str
    body: Any


class AgentClient(LoopmemClient):
    """The agent's HTTP client, whose key changes with each example's fresh world."""

    def use_key(self, raw_key: str) -> None:
        self._api_key = raw_key


class Down:
    """An embedding provider that is down: recall falls back, the gate fails open."""

    def embed(self, texts: Any) -> list[list[float]]:
        raise embedders.EmbeddingTimeout()


ACTOR = st.integers(min_value=0, max_value=w.TENANT_COUNT * 5 - 1)
WORD_LISTS = st.lists(st.sampled_from(w.WORDS), min_size=1, max_size=4)
# A peer is another subject of the caller's tenant (the harder case: same tenant predicate); a stranger is a row
# of another tenant (often of a subject with the same agent_id).
TARGET = st.sampled_from(("own", "peer", "stranger", "nonexistent"))


class IsolationMachine(RuleBasedStateMachine):
    """Fifteen actors over three tenants; each rule is one action of one of them."""

    tally: Tally
    live_server_url: str
    mcp_servers: dict[str, tuple[MCPServer, AgentClient]]

    def __init__(self) -> None:
        super().__init__()
        w.reset_database()
        self.world = w.build_world()
        self.mcp = {a.name: self.mcp_server(a) for a in self.world.actors if a.role == ApiKey.Role.AGENT}
        self.embedder_down = False
        self.allowed: list[w.Region] = []
        self.before = w.snapshot(self.world)
        self.tally.examples += 1

    def teardown(self) -> None:
        embedders.PROVIDERS["hashing"] = _HASHING

    # --- plumbing --------------------------------------------------------------------------------------------

    def mcp_server(self, actor: w.Actor) -> MCPServer:
        """The MCP server an agent runs, built once per actor name (building one registers every tool, which is
        slow) and handed the example's fresh key."""
        if actor.name not in self.mcp_servers:
            client = AgentClient(self.live_server_url, actor.raw_key)
            self.mcp_servers[actor.name] = (build_server(client), client)
        server, client = self.mcp_servers[actor.name]
        client.use_key(actor.raw_key)
        return server

    def actor(self, index: int) -> w.Actor:
        return self.world.actors[index]

    def http(self, actor: w.Actor, method: str, path: str, body: Any = None) -> Answer:
        self.tally.operations += 1
        call = getattr(actor.client, method)
        response = call(path, body, format="json") if method in ("post", "patch") else call(path, body)
        text = response.content.decode()
        answer = Answer(response.status_code, text, json.loads(text) if text else None)
        self.tally.outcomes[f"{method.upper()} {_ID.sub(':id', path)} {answer.status}"] += 1
        self.check_answer(actor, answer, sent=f"{path} {json.dumps(body)}")
        return answer

    def tool(self, actor: w.Actor, name: str, **arguments: Any) -> Answer:
        """One MCP tool call through the server an agent runs, against the live API."""
        self.tally.operations += 1
        self.tally.mcp_calls += 1
        server = self.mcp[actor.name]

        async def call() -> tuple[bool, str]:
            async with Client(server) as client:
                result = await client.call_tool(name, arguments)
                [content] = result.content
                assert isinstance(content, TextContent)
                return result.is_error, content.text

        is_error, text = anyio.run(call)
        body = json.loads(text)
        status = body["error"]["status"] if is_error else 200
        answer = Answer(status or 0, text, body)
        self.tally.outcomes[f"mcp {name} {answer.status}"] += 1
        self.check_answer(actor, answer, sent=json.dumps(arguments))
        return answer

    def via(self, actor: w.Actor, use_mcp: bool) -> bool:
        return use_mcp and actor.name in self.mcp

    def check_answer(self, actor: w.Actor, answer: Answer, *, sent: str) -> None:
        """Never a server error; nothing in the body that belongs outside the actor's reach."""
        self.tally.checks += 1
        code = (answer.body or {}).get("error", {}).get("code") if isinstance(answer.body, dict) else None
        assert answer.status != 0, f"{actor.name}: the tool could not reach the API: {answer.text}"
        assert answer.status < 500 or (answer.status == 503 and code in DEGRADED_503), (
            f"{actor.name}: {answer.status} {answer.text[:2000]}"
        )
        leaked = w.leaks_in(answer.text, actor, self.world, sent)
        assert not leaked, f"LEAK to {actor.name} ({actor.role}): {leaked} in {answer.text[:2000]}"

    def pick(self, data: st.DataObject, rows: list[Any]) -> Any:
        # Always one draw from the same range: what a step draws must not depend on the database's state, or
        # hypothesis cannot replay a sequence of steps (FlakyStrategyDefinition).
        index = data.draw(st.integers(0, 1 << 16))
        return rows[index % len(rows)] if rows else None

    def foreign_memory(self, actor: w.Actor, data: st.DataObject, kind: str = "peer") -> str | None:
        """A memory the actor may not address: a peer's (same tenant), or a stranger's (another tenant)."""
        rows = Memory.objects.exclude(id__in=w.reachable_memories(actor).values("id"))
        rows = rows.filter(tenant_id=actor.tenant_id) if kind == "peer" else rows.exclude(tenant_id=actor.tenant_id)
        foreign: str | None = self.pick(data, w.in_write_order(rows))
        return foreign

    def target_memory(self, actor: w.Actor, data: st.DataObject, kind: str) -> str:
        if kind == "own":
            own = self.pick(data, w.in_write_order(w.own_memories(actor)))
            if own:
                return str(own)
        if kind in ("peer", "stranger"):
            foreign = self.foreign_memory(actor, data, kind)
            if foreign:
                return foreign
        return str(uuid.uuid4())

    def project_choice(self, actor: w.Actor, data: st.DataObject) -> tuple[str | None, bool]:
        """(project_id, is it the actor's tenant's): global, an own project, or a foreign one."""
        choice = data.draw(st.sampled_from(("global", "own", "foreign")))
        if choice == "global":
            return None, True
        if choice == "own":
            return str(self.pick(data, self.world.projects[actor.tenant_index]).id), True
        other = (actor.tenant_index + data.draw(st.integers(1, w.TENANT_COUNT - 1))) % w.TENANT_COUNT
        return str(self.pick(data, self.world.projects[other]).id), False

    def allow(self, *regions: w.Region) -> None:
        self.allowed.extend(regions)

    # --- writes ----------------------------------------------------------------------------------------------

    @rule(
        i=ACTOR, words=WORD_LISTS, tags=st.lists(st.sampled_from(TAGS), unique=True), mcp=st.booleans(), data=st.data()
    )
    def remember(self, i: int, words: list[str], tags: list[str], mcp: bool, data: st.DataObject) -> None:
        actor = self.actor(i)
        self.allow(actor.region)
        project_id, own_project = self.project_choice(actor, data)
        body = {"text": self.world.text(words), "tags": tags, "metadata": {"by": actor.name}, "project_id": project_id}
        if self.via(actor, mcp):
            answer = self.tool(actor, "memory_remember", **body)
        else:
            answer = self.http(actor, "post", "/api/v1/memory", body)
        if not own_project:
            assert (answer.status, answer.body["error"]["code"]) == (422, "invalid_project_id"), answer.text
        elif answer.status in (200, 201):
            self.assert_owned_memory(actor, answer.body["data"])

    @rule(i=ACTOR, session=st.sampled_from(SESSIONS), words=WORD_LISTS, role=st.sampled_from(("user", "fact")))
    def append_turn(self, i: int, session: str, words: list[str], role: str) -> None:
        actor = self.actor(i)
        self.allow(actor.region)
        # Sentences the offline distiller keeps as facts, so promotion has something to write.
        content = f"We always {' '.join(words)} before the release, {self.world.token()}."
        body = {"tier": "session", "session_id": session, "role": role, "content": content}
        answer = self.http(actor, "post", "/api/v1/memory", body)
        assert answer.status == 201, answer.text
        turn = SessionTurn.objects.get(id=answer.body["data"]["id"])
        assert (turn.tenant_id, turn.subject_id) == (actor.tenant_id, actor.subject_id)

    @rule(i=ACTOR, items=st.lists(st.tuples(WORD_LISTS, st.booleans()), min_size=1, max_size=4), data=st.data())
    def batch(self, i: int, items: list[tuple[list[str], bool]], data: st.DataObject) -> None:
        actor = self.actor(i)
        self.allow(actor.region)
        memories: list[dict[str, Any]] = []
        for words, session in items:
            if session:
                memories.append(
                    {"tier": "session", "session_id": SESSIONS[0], "role": "fact", "content": self.world.text(words)}
                )
            else:
                memories.append({"text": self.world.text(words), "project_id": self.project_choice(actor, data)[0]})
        answer = self.http(actor, "post", "/api/v1/memory/batch", {"memories": memories})
        assert answer.status == 200, answer.text
        for item in answer.body["data"]:
            if item["status"] == 201 and item["memory"].get("tier") == "long_term":
                self.assert_owned_memory(actor, item["memory"])

    @rule(i=ACTOR, kind=TARGET, words=WORD_LISTS, mcp=st.booleans(), data=st.data())
    def correct(self, i: int, kind: str, words: list[str], mcp: bool, data: st.DataObject) -> None:
        actor = self.actor(i)
        self.allow(actor.region)
        memory_id = self.target_memory(actor, data, kind)
        text = self.world.text(words)
        if self.via(actor, mcp):
            answer = self.tool(actor, "memory_correct", id=memory_id, text=text)
        else:
            answer = self.http(actor, "patch", f"/api/v1/memory/{memory_id}", {"text": text})
        if not w.own_memories(actor).filter(id=memory_id).exists():
            assert answer.status == 404, answer.text
        elif answer.status == 200:
            self.assert_owned_memory(actor, answer.body["data"])

    @rule(i=ACTOR, kind=TARGET, mcp=st.booleans(), data=st.data())
    def forget(self, i: int, kind: str, mcp: bool, data: st.DataObject) -> None:
        actor = self.actor(i)
        self.allow(actor.region)
        memory_id = self.target_memory(actor, data, kind)
        reachable = w.reachable_memories(actor).filter(id=memory_id).exists()
        if self.via(actor, mcp):
            answer = self.tool(actor, "memory_forget", id=memory_id)
        else:
            answer = self.http(actor, "delete", f"/api/v1/memory/{memory_id}")
        assert answer.status == (200 if reachable else 404), answer.text

    @rule(
        i=ACTOR,
        words=WORD_LISTS,
        visibility=st.sampled_from(("shared", "owner", "private")),
        published=st.booleans(),
        data=st.data(),
    )
    def propose_article(self, i: int, words: list[str], visibility: str, published: bool, data: st.DataObject) -> None:
        actor = self.actor(i)
        self.allow(actor.region)
        project_id, own_project = self.project_choice(actor, data)
        title = f"{' '.join(words)} {self.world.token()}"
        body = {
            "title": title,
            "body": self.world.text(reversed(words)),
            "category": "finding",
            "status": "published" if published else "draft",
            "visibility": visibility,
            "project_id": project_id,
        }
        answer = self.http(actor, "post", "/api/v1/knowledge/articles", body)
        if not own_project:
            assert answer.status == 422, answer.text
        elif answer.status == 201:
            article = Article.objects.get(id=answer.body["data"]["article"]["id"])
            assert (article.tenant_id, article.owner_subject_id) == (actor.tenant_id, actor.subject_id)

    @rule(i=ACTOR, kind=TARGET, data=st.data())
    def graduate(self, i: int, kind: str, data: st.DataObject) -> None:
        actor = self.actor(i)
        self.allow(actor.region)
        memory_id = self.target_memory(actor, data, kind)
        answer = self.http(actor, "post", "/api/v1/memory/graduate", {"memory_id": memory_id})
        if not w.own_memories(actor).filter(id=memory_id).exists():
            assert answer.status == 404, answer.text
        if answer.status == 201:
            article = Article.objects.get(id=answer.body["data"]["article"]["id"])
            assert (article.tenant_id, article.owner_subject_id) == (actor.tenant_id, actor.subject_id)

    @rule(i=ACTOR, session=st.sampled_from(SESSIONS))
    def promote(self, i: int, session: str) -> None:
        actor = self.actor(i)
        self.allow(actor.region)
        answer = self.http(actor, "post", "/api/v1/memory/promote", {"session_id": session})
        assert answer.status in (202, 429), answer.text

    # --- the service's own work --------------------------------------------------------------------------------

    @precondition(lambda self: PromotionJob.objects.filter(state="pending").exists())
    @rule(data=st.data())
    def promotion_worker_runs_a_job(self, data: st.DataObject) -> None:
        """What the worker does with one pending job: only the job's own subject may change."""
        job = self.pick(data, list(PromotionJob.objects.filter(state="pending").order_by("inserted_at", "session_id")))
        self.allow((job.tenant_id, job.subject_id))
        jobs.promotion_run(job_id=str(job.id))
        self.tally.operations += 1
        job.refresh_from_db()
        figures = f"candidates={job.candidates} gated_out={job.gated_out} deduplicated={job.deduplicated}"
        self.tally.outcomes[f"promotion {job.outcome} {figures} written={job.written}"] += 1
        for memory in Memory.objects.filter(
            source="promoted", source_session_id=job.session_id, tenant_id=job.tenant_id
        ):
            turns = SessionTurn.objects.filter(tenant_id=memory.tenant_id, subject_id=memory.subject_id)
            assert any(
                token in memory.text for token in w.TOKEN.findall(" ".join(turns.values_list("content", flat=True)))
            ) or not w.TOKEN.findall(memory.text), (
                f"promoted memory {memory.id} holds a token from outside its subject's turns"
            )

    @rule()
    def embedding_worker_runs(self) -> None:
        """The embedding worker catches up (a provider that is down leaves the rows for later)."""
        if self.embedder_down:
            return
        try:
            for memory_id in Memory.objects.filter(embedding__isnull=True).values_list("id", flat=True):
                memory_embedding.memory_embed(memory_id=str(memory_id))
            for article_id in Article.objects.filter(embedding__isnull=True).values_list("id", flat=True):
                article_embed(article_id=str(article_id))
        except embedders.EmbeddingFailure:
            pass  # the circuit is still open after an outage: the task retries later, the sweep finds the rest
        self.tally.operations += 1

    @rule(down=st.booleans())
    def embedding_provider_goes(self, down: bool) -> None:
        self.embedder_down = down
        embedders.PROVIDERS["hashing"] = (lambda spec: Down()) if down else _HASHING

    @rule(data=st.data())
    def hours_pass_and_the_graduation_sweep_runs(self, data: st.DataObject) -> None:
        """Hours pass: some embedded memories have been recalled three times, and the hourly sweep graduates them."""
        embedded = w.in_write_order(Memory.objects.filter(embedding__isnull=False))
        hot = {self.pick(data, embedded) for _ in range(data.draw(st.integers(0, 3)))} - {None}
        Memory.objects.filter(id__in=hot).update(recall_count=3)
        self.allow(*[(t.id, w.ANY_SUBJECT) for t in self.world.tenants])
        report = memory_graduation_sweep()
        self.tally.operations += 1
        self.tally.outcomes[f"graduation sweep created={report['created']}"] += 1
        for article in Article.objects.filter(title__contains="(memory "):
            memory_id = article.title.rsplit("(memory ", 1)[1].rstrip(")")
            source = Memory.objects.filter(id=memory_id).first()
            if source is not None:
                assert (source.tenant_id, source.subject_id) == (article.tenant_id, article.owner_subject_id)

    # --- reads -----------------------------------------------------------------------------------------------

    @rule(
        i=ACTOR,
        words=WORD_LISTS,
        mode=st.sampled_from(MODES),
        tags=st.lists(st.sampled_from(TAGS), max_size=1),
        include_superseded=st.booleans(),
        foreign_token=st.booleans(),
        mcp=st.booleans(),
        data=st.data(),
    )
    def recall(
        self,
        i: int,
        words: list[str],
        mode: str,
        tags: list[str],
        include_superseded: bool,
        foreign_token: bool,
        mcp: bool,
        data: st.DataObject,
    ) -> None:
        actor = self.actor(i)
        self.allow(actor.region)  # recall bumps its own hits' counts
        query = " ".join(words)
        if foreign_token and self.world.tokens_issued:
            # Ask for another scope's row by its exact token: the keyword lane must still not find it.
            query += f" tok{data.draw(st.integers(0, 1 << 16)) % self.world.tokens_issued + 1}"
        project_id, _ = self.project_choice(actor, data)
        body: dict[str, Any] = {"query": query, "mode": mode, "project_id": project_id, "limit": 100}
        if include_superseded:
            body["include_superseded"] = True
        if tags:
            body["tags"] = tags
        if self.via(actor, mcp):
            answer = self.tool(actor, "memory_recall", **body)
        else:
            answer = self.http(actor, "post", "/api/v1/memory/recall", body)
        assert answer.status == 200, answer.text
        self.assert_recall_hits(actor, answer.body, project_id, include_superseded, tags)

    @rule(
        i=ACTOR,
        words=WORD_LISTS,
        mode=st.sampled_from(MODES),
        session=st.sampled_from((None, *SESSIONS)),
        mcp=st.booleans(),
        data=st.data(),
    )
    def merged_recall(
        self, i: int, words: list[str], mode: str, session: str | None, mcp: bool, data: st.DataObject
    ) -> None:
        actor = self.actor(i)
        self.allow(actor.region)  # the ledger records what it surfaced, under the caller's key
        project_id, _ = self.project_choice(actor, data)
        body: dict[str, Any] = {"query": " ".join(words), "mode": mode, "project_id": project_id, "limit": 50}
        if session:
            body["session_id"] = session
        if self.via(actor, mcp):
            answer = self.tool(actor, "recall_context", **body)
        else:
            answer = self.http(actor, "post", "/api/v1/recall", body)
        assert answer.status == 200, answer.text
        self.assert_recall_hits(actor, answer.body["memory"], project_id, False, [])
        visible = {str(a.id) for a in w.visible_articles(actor) if a.status == "published"}
        for item in answer.body["data"]:
            if item["source"] == "knowledge":
                assert item["article"]["id"] in visible, f"{actor.name} was shown article {item['article']['id']}"
        meta = answer.body["meta"]
        self.tally.checks += 1
        assert meta["selected_count"] == len(answer.body["data"])
        assert meta["candidates_considered"]["knowledge"] <= len(visible)
        assert meta["candidates_considered"]["memory"] <= w.own_memories(actor).count()

    @rule(i=ACTOR, include_superseded=st.booleans(), all_subjects=st.booleans(), mcp=st.booleans())
    def list_memories(self, i: int, include_superseded: bool, all_subjects: bool, mcp: bool) -> None:
        actor = self.actor(i)
        params: dict[str, Any] = {"limit": 200}
        if include_superseded:
            params["include_superseded"] = "true"
        if all_subjects:
            params["all_subjects"] = "true"
        if self.via(actor, mcp):  # the tool has no all_subjects: an agent's would be ignored anyway
            answer = self.tool(actor, "memory_list", limit=200, include_superseded=include_superseded)
        else:
            answer = self.http(actor, "get", "/api/v1/memory", params)
        assert answer.status == 200, answer.text
        expected = w.reachable_memories(actor) if all_subjects else w.own_memories(actor)
        if not include_superseded:
            expected = expected.filter(superseded_by__isnull=True)
        self.tally.checks += 1
        # The count is exactly the caller's rows: it reveals nothing of anyone else's.
        assert answer.body["meta"]["total_count"] == expected.count(), (actor.name, answer.body["meta"])
        assert {m["id"] for m in answer.body["data"]} <= {str(i) for i in expected.values_list("id", flat=True)}

    @rule(i=ACTOR, session=st.sampled_from(SESSIONS))
    def session_history(self, i: int, session: str) -> None:
        actor = self.actor(i)
        answer = self.http(actor, "get", f"/api/v1/memory/sessions/{session}", {"limit": 200})
        assert answer.status == 200, answer.text
        own = w.reachable_turns(actor).filter(session_id=session)
        self.tally.checks += 1
        assert answer.body["meta"]["total_count"] == own.count()
        assert {t["id"] for t in answer.body["data"]} == {str(i) for i in own.values_list("id", flat=True)}

    @rule(i=ACTOR, kind=TARGET, history=st.booleans(), mcp=st.booleans(), data=st.data())
    def read_memory_by_id(self, i: int, kind: str, history: bool, mcp: bool, data: st.DataObject) -> None:
        actor = self.actor(i)
        memory_id = self.target_memory(actor, data, kind)
        if self.via(actor, mcp):
            answer = self.tool(actor, "memory_history" if history else "memory_get", id=memory_id)
        else:
            answer = self.http(actor, "get", f"/api/v1/memory/{memory_id}" + ("/history" if history else ""))
        reachable = w.reachable_memories(actor).filter(id=memory_id).exists()
        assert answer.status == (200 if reachable else 404), answer.text

    @rule(i=ACTOR, words=WORD_LISTS, mode=st.sampled_from(SEARCH_MODES), mcp=st.booleans())
    def search_knowledge(self, i: int, words: list[str], mode: str, mcp: bool) -> None:
        actor = self.actor(i)
        self.allow(actor.region)  # an agent's search is recorded in the ledger under its key
        if self.via(actor, mcp):
            answer = self.tool(actor, "knowledge_search", query=" ".join(words), mode=mode, limit=50)
        else:
            answer = self.http(
                actor, "get", "/api/v1/knowledge/search", {"q": " ".join(words), "mode": mode, "limit": 50}
            )
        if answer.status == 503:
            assert self.embedder_down or mode == "semantic", answer.text
            return
        assert answer.status == 200, answer.text
        visible = {str(a.id) for a in w.visible_articles(actor) if a.status == "published"}
        self.tally.checks += 1
        assert {hit["id"] for hit in answer.body["data"]} <= visible

    @rule(i=ACTOR)
    def list_articles(self, i: int) -> None:
        actor = self.actor(i)
        answer = self.http(actor, "get", "/api/v1/knowledge/articles", {"limit": 200})
        assert answer.status == 200, answer.text
        visible = {str(a.id) for a in w.visible_articles(actor)}
        self.tally.checks += 1
        assert answer.body["meta"]["total_count"] == len(visible)
        assert {a["id"] for a in answer.body["data"]} == visible

    @rule(i=ACTOR, kind=TARGET, data=st.data())
    def read_article(self, i: int, kind: str, data: st.DataObject) -> None:
        actor = self.actor(i)
        self.allow(actor.region)  # a read writes a `get` row to the ledger under the reader's key
        visible = {str(a.id) for a in w.visible_articles(actor)}
        hidden = Article.objects.exclude(id__in=visible)
        pools = {
            "own": w.in_write_order(Article.objects.filter(id__in=visible)),
            "peer": w.in_write_order(hidden.filter(tenant_id=actor.tenant_id)),
            "stranger": w.in_write_order(hidden.exclude(tenant_id=actor.tenant_id)),
            "nonexistent": [],
        }
        pool = [str(a) for a in pools[kind]]
        article_id = self.pick(data, pool) or str(uuid.uuid4())
        answer = self.http(actor, "get", f"/api/v1/knowledge/articles/{article_id}")
        assert answer.status == (200 if article_id in visible else 404), answer.text

    # --- the existence oracle ----------------------------------------------------------------------------------

    @rule(i=ACTOR, mcp=st.booleans(), data=st.data())
    def a_foreign_id_answers_like_a_missing_one(self, i: int, mcp: bool, data: st.DataObject) -> None:
        """Every by-id operation answers a foreign id exactly as it answers an id that never existed."""
        actor = self.actor(i)
        foreign = self.foreign_memory(actor, data, data.draw(st.sampled_from(("peer", "stranger"))))
        hidden = Article.objects.exclude(id__in=[a.id for a in w.visible_articles(actor)])
        foreign_article = self.pick(data, w.in_write_order(hidden))
        # A session id only others used: the actor's own turns or jobs under the same name would answer.
        mine = set(w.reachable_turns(actor).values_list("session_id", flat=True))
        mine |= set(
            PromotionJob.objects.filter(tenant_id=actor.tenant_id, subject_id=actor.subject_id).values_list(
                "session_id", flat=True
            )
        )
        others = set(SessionTurn.objects.values_list("session_id", flat=True)) - mine
        foreign_session = self.pick(data, sorted(others))
        missing = str(uuid.uuid4())
        probes: list[tuple[str, Callable[[str], Answer]]] = []
        if foreign:
            probes += [
                (foreign, lambda m: self.http(actor, "get", f"/api/v1/memory/{m}")),
                (foreign, lambda m: self.http(actor, "get", f"/api/v1/memory/{m}/history")),
                (foreign, lambda m: self.http(actor, "patch", f"/api/v1/memory/{m}", {"confidence": 0.5})),
                (foreign, lambda m: self.http(actor, "delete", f"/api/v1/memory/{m}")),
                (foreign, lambda m: self.http(actor, "post", "/api/v1/memory/graduate", {"memory_id": m})),
            ]
            if self.via(actor, mcp):
                probes += [
                    (foreign, lambda m: self.tool(actor, "memory_get", id=m)),
                    (foreign, lambda m: self.tool(actor, "memory_forget", id=m)),
                    (foreign, lambda m: self.tool(actor, "memory_correct", id=m, confidence=0.5)),
                ]
        if foreign_article:
            probes += [
                (foreign_article, lambda a: self.http(actor, "get", f"/api/v1/knowledge/articles/{a}")),
                (
                    foreign_article,
                    lambda a: self.http(actor, "patch", f"/api/v1/knowledge/articles/{a}", {"title": "x"}),
                ),
            ]
        if foreign_session:
            probes += [
                (foreign_session, lambda s: self.http(actor, "get", f"/api/v1/memory/sessions/{s}")),
                (foreign_session, lambda s: self.http(actor, "get", f"/api/v1/memory/promote/{s}")),
            ]
        for foreign_id, probe in probes:
            unknown = missing if foreign_id != foreign_session else f"never-{missing}"
            seen, unseen = probe(foreign_id), probe(unknown)
            self.tally.checks += 1
            assert seen.status == unseen.status, (actor.name, foreign_id, seen.text, unseen.text)
            assert seen.text.replace(foreign_id, "<id>") == unseen.text.replace(unknown, "<id>"), (
                seen.text,
                unseen.text,
            )

    # --- checks that hold after every step ---------------------------------------------------------------------

    @invariant()
    def nothing_outside_the_actors_scope_changed(self) -> None:
        after = w.snapshot(self.world)
        changed = w.changes_outside(self.before, after, self.allowed)
        self.tally.checks += 1
        self.tally.steps += 1
        assert not changed, "changed outside the caller's scope:\n" + "\n".join(changed[:20])
        self.before, self.allowed = after, []

    # --- helpers -----------------------------------------------------------------------------------------------

    def assert_owned_memory(self, actor: w.Actor, data: dict[str, Any]) -> None:
        row = Memory.objects.get(id=data["id"])
        self.tally.checks += 1
        assert (row.tenant_id, row.subject_id) == (actor.tenant_id, actor.subject_id), data
        assert (data["tenant_id"], data["subject_id"]) == (str(actor.tenant_id), actor.subject_id)

    def assert_recall_hits(
        self, actor: w.Actor, body: dict[str, Any], project_id: str | None, include_superseded: bool, tags: list[str]
    ) -> None:
        """Every hit is the caller's own (subject, tenant), in the partition, live unless asked otherwise."""
        self.tally.checks += 1
        if body["meta"].get("fallback"):
            self.tally.outcomes[f"recall fallback {body['meta'].get('reason')}"] += 1
        hits = body["data"]
        assert body["meta"]["total_count"] == len(hits)
        ids = [hit["memory"]["id"] for hit in hits]
        rows = {str(r.id): r for r in Memory.objects.filter(id__in=ids)}
        for memory_id in ids:
            row = rows[memory_id]
            assert (row.tenant_id, row.subject_id) == (actor.tenant_id, actor.subject_id), (
                f"{actor.name} recalled {memory_id}"
            )
            assert row.project_id is None or str(row.project_id) == project_id, (memory_id, project_id)
            assert include_superseded or row.superseded_by_id is None
            assert set(tags) <= set(row.tags)


_HASHING = embedders.PROVIDERS["hashing"]
_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|(?<=sessions/)[^/]+|(?<=promote/)[^/]+")
