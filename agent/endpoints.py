"""The public HTTP API (docs/api.md) as one typed method per endpoint, shared by the sync and the async client.

Each method builds a `Call` (method, path, query, body, and whether it may be sent again after a lost answer) and
hands it to `send`, which the sync `Client` answers with a JSON body and the `AsyncClient` with an awaitable of
one. So the two clients cannot drift apart: they are the same methods over two transports. `CALLS` answers with
the `Call` itself, for code that decides its requests apart from sending them (the LangGraph store).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from agent.wire import (
    DEFAULT_RECALL_MODE,
    JSONObject,
    MemoryFilters,
    QueryValue,
    RecallMode,
    Source,
    canonical_uuid,
    path_segment,
    present,
)

R = TypeVar("R", covariant=True)

Tier = Literal["long_term", "session"]
Role = Literal["user", "assistant", "system", "fact"]
KnowledgeMode = Literal["keyword", "semantic", "combined"]
ArticleCategory = Literal["pattern", "decision", "finding", "reference"]


@dataclass(frozen=True)
class Call:
    """One request to the API, before a transport sends it."""

    method: Literal["GET", "POST", "PATCH", "DELETE"]
    path: str
    query: dict[str, QueryValue] | None = None
    body: Any = None
    # Safe to send again when the answer was lost (a timeout, a reset): a read, or a write the server recognises
    # when repeated (an `Idempotency-Key`, an import's chain keys, a promotion already in flight). A correction or a
    # forget is not: its retry would answer 409 or 404 for a write that did happen.
    replayable: bool = False
    # The answer is NDJSON (the export), returned as `{"data": [line, ...]}`.
    ndjson: bool = False

    @property
    def is_write(self) -> bool:
        """Writes carry an `Idempotency-Key` (reads sent as POST, such as recall, are not writes)."""
        return self.method != "GET" and not self.replayable_read

    @property
    def replayable_read(self) -> bool:
        return self.method == "POST" and self.path in _READS_SENT_AS_POST


_READS_SENT_AS_POST = frozenset({"/api/v1/memory/recall", "/api/v1/recall"})


class Endpoints(ABC, Generic[R]):
    """Every endpoint an API key may call, as the key sees it (the key decides tenant and subject)."""

    @abstractmethod
    def send(self, call: Call) -> R:
        """Send a prepared call (every method below builds one): each transport implements it."""

    # --- Long-term memory and session turns ---------------------------------------------------------------------

    def memory_remember(
        self,
        *,
        text: str | None = None,
        tier: Tier | None = None,
        confidence: float | None = None,
        tags: list[str] | None = None,
        metadata: JSONObject | None = None,
        source_session_id: str | None = None,
        project_id: str | None = None,
        session_id: str | None = None,
        role: Role | None = None,
        content: str | None = None,
        expires_at: str | None = None,
    ) -> R:
        """POST /api/v1/memory: a long-term memory (`text`), or a session turn (`tier="session"`)."""
        body = present(
            tier=tier,
            text=text,
            confidence=confidence,
            tags=tags,
            metadata=metadata,
            source_session_id=source_session_id,
            project_id=project_id,
            session_id=session_id,
            role=role,
            content=content,
            expires_at=expires_at,
        )
        return self.send(Call("POST", "/api/v1/memory", body=body, replayable=True))

    def memory_batch(self, memories: list[JSONObject]) -> R:
        """POST /api/v1/memory/batch: up to 100 remember bodies, each written (or refused) on its own."""
        return self.send(Call("POST", "/api/v1/memory/batch", body={"memories": memories}, replayable=True))

    def memory_recall(
        self,
        *,
        query: str,
        limit: int | None = None,
        include_superseded: bool | None = None,
        project_id: str | None = None,
        filters: MemoryFilters | None = None,
        mode: RecallMode | None = DEFAULT_RECALL_MODE,
    ) -> R:
        """POST /api/v1/memory/recall: your memories for `query`, hybrid by default (None: the API's default),
        among those matching `filters` (applied inside the search, so a filtered recall is complete)."""
        body = present(
            query=query, limit=limit, include_superseded=include_superseded, project_id=project_id, mode=mode
        )
        body.update((filters or MemoryFilters()).body())
        return self.send(Call("POST", "/api/v1/memory/recall", body=body, replayable=True))

    def memory_list(
        self,
        *,
        limit: int | None = None,
        offset: int | None = None,
        include_superseded: bool | None = None,
        source: Source | None = None,
        filters: MemoryFilters | None = None,
    ) -> R:
        """GET /api/v1/memory: your memories, newest first, matching `filters` (every project's)."""
        query: dict[str, QueryValue] = {**(filters or MemoryFilters()).query()}
        query.update(limit=limit, offset=offset, include_superseded=include_superseded)
        if source is not None:
            query["source"] = source
        return self.send(Call("GET", "/api/v1/memory", query=query, replayable=True))

    def memory_get(self, memory_id: str) -> R:
        """GET /api/v1/memory/:id: one of your memories, live or superseded."""
        return self.send(Call("GET", f"/api/v1/memory/{_memory_id(memory_id)}", replayable=True))

    def memory_history(self, memory_id: str) -> R:
        """GET /api/v1/memory/:id/history: the memory's versions, oldest first, up to the live one."""
        return self.send(Call("GET", f"/api/v1/memory/{_memory_id(memory_id)}/history", replayable=True))

    def memory_correct(
        self,
        memory_id: str,
        *,
        text: str | None = None,
        confidence: float | None = None,
        tags: list[str] | None = None,
        metadata: JSONObject | None = None,
    ) -> R:
        """PATCH /api/v1/memory/:id: a corrected new version; the old one stays in the history. 409
        `already_superseded` (`AlreadySuperseded`) names the newer version in `details.superseded_by`."""
        body = present(text=text, confidence=confidence, tags=tags, metadata=metadata)
        return self.send(Call("PATCH", f"/api/v1/memory/{_memory_id(memory_id)}", body=body))

    def memory_forget(self, memory_id: str) -> R:
        """DELETE /api/v1/memory/:id (forgetting a correction brings back the version it corrected)."""
        return self.send(Call("DELETE", f"/api/v1/memory/{_memory_id(memory_id)}"))

    def memory_export(self, *, include_superseded: bool | None = None) -> R:
        """GET /api/v1/memory/export: your memories, oldest first, as `{"data": [memory, ...]}`."""
        query: dict[str, QueryValue] = {"include_superseded": include_superseded}
        return self.send(Call("GET", "/api/v1/memory/export", query=query, replayable=True, ndjson=True))

    def memory_import(self, rows: list[JSONObject]) -> R:
        """POST /api/v1/memory/import: export lines (or remember bodies); what you already hold is skipped."""
        return self.send(Call("POST", "/api/v1/memory/import", body=rows, replayable=True))

    def session_history(self, session_id: str, *, limit: int | None = None, offset: int | None = None) -> R:
        """GET /api/v1/memory/sessions/:session_id: the session's unexpired turns in order."""
        path = f"/api/v1/memory/sessions/{_session_id(session_id)}"
        return self.send(Call("GET", path, query={"limit": limit, "offset": offset}, replayable=True))

    def memory_promote(self, session_id: str) -> R:
        """POST /api/v1/memory/promote: compile the session's turns into long-term memories, asynchronously."""
        return self.send(Call("POST", "/api/v1/memory/promote", body={"session_id": session_id}, replayable=True))

    def memory_promotion(self, session_id: str) -> R:
        """GET /api/v1/memory/promote/:session_id: your last promotion job for the session."""
        return self.send(Call("GET", f"/api/v1/memory/promote/{_session_id(session_id)}", replayable=True))

    def memory_graduate(self, *, memory_id: str, re_scope: Literal["inherit", "global"] | None = None) -> R:
        """POST /api/v1/memory/graduate: write a memory into the Knowledge Wiki (owner-visible)."""
        return self.send(Call("POST", "/api/v1/memory/graduate", body=present(memory_id=memory_id, re_scope=re_scope)))

    # --- Merged recall ------------------------------------------------------------------------------------------

    def recall_context(
        self,
        *,
        query: str,
        project_id: str | None = None,
        limit: int | None = None,
        session_id: str | None = None,
        filters: MemoryFilters | None = None,
        mode: RecallMode | None = DEFAULT_RECALL_MODE,
    ) -> R:
        """POST /api/v1/recall: memories and knowledge merged, with `meta.recall_id` for `recall_referenced`."""
        body = present(query=query, project_id=project_id, limit=limit, session_id=session_id, mode=mode)
        body.update((filters or MemoryFilters()).body())
        return self.send(Call("POST", "/api/v1/recall", body=body, replayable=True))

    def recall_referenced(self, *, recall_id: str, article_ids: list[str]) -> R:
        """POST /api/v1/recall/:recall_id/referenced: which surfaced articles the answer actually used."""
        recall_id = canonical_uuid(
            recall_id,
            field="recall_id",
            code="invalid_recall_id",
            message="The `recall_id` path segment must be the `meta.recall_id` UUID from a recall response.",
        )
        return self.send(Call("POST", f"/api/v1/recall/{recall_id}/referenced", body={"article_ids": article_ids}))

    # --- Knowledge Wiki -----------------------------------------------------------------------------------------

    def knowledge_search(
        self,
        *,
        query: str,
        mode: KnowledgeMode | None = None,
        limit: int | None = None,
        offset: int | None = None,
        project_id: str | None = None,
        category: ArticleCategory | None = None,
        tags: list[str] | None = None,
    ) -> R:
        """GET /api/v1/knowledge/search: Knowledge Wiki articles for `query`."""
        query_params: dict[str, QueryValue] = {
            "q": query,
            "mode": mode,
            "limit": limit,
            "offset": offset,
            "project_id": project_id,
            "category": category,
            "tags": ",".join(tags) if tags else None,
        }
        return self.send(Call("GET", "/api/v1/knowledge/search", query=query_params, replayable=True))

    def article_create(
        self,
        *,
        title: str,
        body: str,
        category: ArticleCategory,
        tags: list[str] | None = None,
        status: Literal["draft", "published"] | None = None,
        visibility: Literal["owner", "shared"] | None = None,
        project_id: str | None = None,
        metadata: JSONObject | None = None,
        idempotency_key: str | None = None,
    ) -> R:
        """POST /api/v1/knowledge/articles: propose an article (through the novelty gate)."""
        fields = present(
            title=title,
            body=body,
            category=category,
            tags=tags,
            status=status,
            visibility=visibility,
            project_id=project_id,
            metadata=metadata,
            idempotency_key=idempotency_key,
        )
        return self.send(
            Call("POST", "/api/v1/knowledge/articles", body=fields, replayable=idempotency_key is not None)
        )

    def article_list(
        self,
        *,
        status: str | None = None,
        category: ArticleCategory | None = None,
        tags: list[str] | None = None,
        project_id: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> R:
        """GET /api/v1/knowledge/articles: the articles you can see, newest first."""
        query: dict[str, QueryValue] = {
            "status": status,
            "category": category,
            "tags": ",".join(tags) if tags else None,
            "project_id": project_id,
            "limit": limit,
            "offset": offset,
        }
        return self.send(Call("GET", "/api/v1/knowledge/articles", query=query, replayable=True))

    def article_get(self, article_id: str) -> R:
        """GET /api/v1/knowledge/articles/:id: one article with its body."""
        return self.send(Call("GET", f"/api/v1/knowledge/articles/{_article_id(article_id)}", replayable=True))

    def article_update(
        self,
        article_id: str,
        *,
        title: str | None = None,
        body: str | None = None,
        tags: list[str] | None = None,
        status: str | None = None,
    ) -> R:
        """PATCH /api/v1/knowledge/articles/:id: edit an article you may edit."""
        fields = present(title=title, body=body, tags=tags, status=status)
        return self.send(Call("PATCH", f"/api/v1/knowledge/articles/{_article_id(article_id)}", body=fields))

    # --- Projects -----------------------------------------------------------------------------------------------

    def project_create(
        self,
        *,
        name: str,
        slug: str | None = None,
        repo_url: str | None = None,
        description: str | None = None,
        metadata: JSONObject | None = None,
    ) -> R:
        """POST /api/v1/projects (user, orchestrator and superadmin keys)."""
        fields = present(name=name, slug=slug, repo_url=repo_url, description=description, metadata=metadata)
        return self.send(Call("POST", "/api/v1/projects", body=fields))

    def project_list(self, *, limit: int | None = None, offset: int | None = None, status: str | None = None) -> R:
        """GET /api/v1/projects: the tenant's projects."""
        query: dict[str, QueryValue] = {"limit": limit, "offset": offset, "status": status}
        return self.send(Call("GET", "/api/v1/projects", query=query, replayable=True))

    def resolve_project(self, *, slug: str | None = None, repo_url: str | None = None, name: str | None = None) -> R:
        """GET /api/v1/projects/resolve: the project for a slug, a repo URL or a name (in that precedence)."""
        query: dict[str, QueryValue] = {"slug": slug, "repo_url": repo_url, "name": name}
        return self.send(Call("GET", "/api/v1/projects/resolve", query=query, replayable=True))


class CallBuilder(Endpoints[Call]):
    """The calls themselves, unsent."""

    def send(self, call: Call) -> Call:
        return call


CALLS = CallBuilder()


def _memory_id(value: str) -> str:
    # The id goes into the path: anything but a canonical UUID is refused before sending.
    return canonical_uuid(value, field="id", code="invalid_memory_id")


def _session_id(value: str) -> str:
    return path_segment(value, field="session_id")


def _article_id(value: str) -> str:
    return path_segment(value, field="article_id")
