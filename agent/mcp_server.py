"""loopmem's MCP server: memory, recall and knowledge tools for coding agents, over stdio or streamable HTTP.

It is a client of the HTTP API (never of the services), acting as the agent key `LOOPMEM_AGENT_KEY` against
`LOOPMEM_URL`, so every isolation rule of the API holds here too. No tool takes a tenant or a subject: the
scope comes from the key alone. Each tool returns the API's JSON response body as text; a failure is a tool
error whose text is the API's error JSON (`{"error": {status, code, message, details}}`), or the same shape
with `status: null` when no answer came (`loopmem_unreachable`, `loopmem_timeout`) or an argument was refused
before sending. No stack trace reaches the agent.

Run `python -m agent.mcp_server` (imports no Django settings, so no embedded database starts) or
`python manage.py mcp`. See docs/agents.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from agent.client import DEFAULT_RECALL_MODE, JSONObject, LoopmemClient, LoopmemError, MemoryFilters, RecallMode
from agent.config import AgentConfig, AgentConfigError, agent_config_from_env

logger = logging.getLogger(__name__)

SERVER_NAME = "loopmem"
DESCRIPTION = "loopmem's MCP server: memory, recall and knowledge tools, as the agent key LOOPMEM_AGENT_KEY."
INSTRUCTIONS = (
    "Agent memory. memory_recall (or recall_context, which adds Knowledge Wiki articles) at the start of a task; "
    "memory_remember for a durable fact about this work that you will need in a later session; memory_correct when "
    "a memory is wrong or outdated (it keeps the history; do not forget and re-remember); session turns "
    "(memory_remember tier=session) for working notes of this session, which memory_promote compiles later. "
    "Never store secrets, credentials or personal data. Scope comes from the server's key: you cannot, and "
    "need not, name a tenant or subject."
)
TRANSPORTS = ("stdio", "streamable-http")

_READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
_DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)

ProjectId = Annotated[
    str | None,
    Field(description="A project's id (from resolve_project) to narrow to global + that project; omit for global."),
]
Limit = Annotated[int | None, Field(description="How many rows at most.")]
MemoryId = Annotated[str, Field(description="The memory's id (a UUID).")]
Tags = Annotated[list[str] | None, Field(description="Only memories carrying every one of these tags.")]
TagsAny = Annotated[list[str] | None, Field(description="Only memories carrying at least one of these tags.")]
MetadataFilter = Annotated[
    dict[str, Any] | None, Field(description='Only memories whose metadata contains this object, e.g. {"lang": "py"}.')
]
SourceFilter = Annotated[
    Literal["explicit", "promoted", "imported"] | None,
    Field(description="explicit: written by you; promoted: compiled from your sessions; imported: by an import."),
]
CreatedAfter = Annotated[str | None, Field(description="ISO 8601: only memories written after this.")]
CreatedBefore = Annotated[str | None, Field(description="ISO 8601: only memories written before this.")]
MinConfidence = Annotated[float | None, Field(description="0..1: only memories with at least this confidence.")]
OccurredAfter = Annotated[
    str | None, Field(description="ISO 8601 date: only memories about a later day (one they name, else written).")
]
OccurredBefore = Annotated[
    str | None, Field(description="ISO 8601 date: only memories about an earlier day (one they name, else written).")
]

DEFAULT_WAIT_SECONDS = 30.0
MAX_WAIT_SECONDS = 120.0


def bounded_wait(seconds: float | None) -> float:
    """How long `memory_promote(wait=true)` waits: the default when unset, never more than the maximum."""
    if seconds is None:
        return DEFAULT_WAIT_SECONDS
    return min(max(seconds, 0.0), MAX_WAIT_SECONDS)


Mode = Annotated[
    RecallMode,
    Field(
        description="hybrid (default): by meaning and by the exact words, names and codes you type, and finds a "
        "memory the moment it is written; deep: hybrid, then the memories that share names and terms with its best "
        "hits (for questions whose answer spans several memories; slower); semantic: by meaning only; keyword: by "
        "the words only."
    ),
]


def build_server(client: LoopmemClient) -> MCPServer:
    """The MCP server whose tools call `client`."""
    server: MCPServer = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    def tool(annotations: ToolAnnotations) -> Callable[[Callable[..., CallToolResult]], Callable[..., CallToolResult]]:
        # Plain text content only: the API's JSON is the result, with no second structured copy.
        return server.tool(annotations=annotations, structured_output=False)

    @tool(_WRITE)
    def memory_remember(
        text: Annotated[str | None, Field(description="The fact to remember (long-term tier).")] = None,
        tier: Annotated[
            Literal["long_term", "session"] | None,
            Field(description="long_term (default): a durable, recallable memory. session: a turn of this session."),
        ] = None,
        confidence: Annotated[float | None, Field(description="0..1, default 1.0 (long-term).")] = None,
        tags: Annotated[list[str] | None, Field(description="Labels (long-term).")] = None,
        source_session_id: Annotated[str | None, Field(description="The session this fact came from.")] = None,
        session_id: Annotated[str | None, Field(description="The session a turn belongs to (session tier).")] = None,
        role: Annotated[
            Literal["user", "assistant", "system", "fact"] | None,
            Field(description="Who said it (session tier); `fact` marks a durable observation."),
        ] = None,
        content: Annotated[str | None, Field(description="The turn's text (session tier).")] = None,
        expires_at: Annotated[
            str | None,
            Field(
                description="ISO 8601 (session tier). Missing: the turn expires after the server's TTL (2 h by "
                "default). Later than that: kept. Earlier than the promotion sweep window (90 min): raised to it."
            ),
        ] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="Any JSON object.")] = None,
        project_id: ProjectId = None,
    ) -> CallToolResult:
        """Store a long-term memory (text) or append a session turn (tier=session, session_id, role, content).

        Long-term memories are private to you, recalled by meaning across sessions; use them for durable facts
        about your work. Never store secrets, credentials or personal data: the text is sent to an embedding
        provider."""
        return _call(
            lambda: client.memory_remember(
                text=text,
                tier=tier,
                confidence=confidence,
                tags=tags,
                source_session_id=source_session_id,
                session_id=session_id,
                role=role,
                content=content,
                expires_at=expires_at,
                metadata=metadata,
                project_id=project_id,
            )
        )

    @tool(_READ)
    def memory_recall(
        query: Annotated[str, Field(description="What you are looking for, in words.")],
        limit: Annotated[int | None, Field(description="1..100, default 10.")] = None,
        include_superseded: Annotated[bool | None, Field(description="Also return superseded memories.")] = None,
        project_id: ProjectId = None,
        tags: Tags = None,
        tags_any: TagsAny = None,
        metadata: MetadataFilter = None,
        source: SourceFilter = None,
        created_after: CreatedAfter = None,
        created_before: CreatedBefore = None,
        min_confidence: MinConfidence = None,
        occurred_after: OccurredAfter = None,
        occurred_before: OccurredBefore = None,
        mode: Mode = DEFAULT_RECALL_MODE,
    ) -> CallToolResult:
        """Your long-term memories for `query`, best first, each with a score.

        The filters narrow the search itself (a filtered recall is as complete as an unfiltered one). Hybrid (the
        default) finds a memory by meaning and by an exact name, path or error code, and finds it the moment it is
        written. `meta.answer_confidence` (high | medium | low | none) says how far the top hit stands out."""
        filters = MemoryFilters(
            tags=tags,
            tags_any=tags_any,
            metadata=metadata,
            source=source,
            created_after=created_after,
            created_before=created_before,
            min_confidence=min_confidence,
            occurred_after=occurred_after,
            occurred_before=occurred_before,
        )
        return _call(
            lambda: client.memory_recall(
                query=query,
                limit=limit,
                include_superseded=include_superseded,
                project_id=project_id,
                filters=filters,
                mode=mode,
            )
        )

    @tool(_READ)
    def memory_list(
        limit: Annotated[int | None, Field(description="1..200, default 50.")] = None,
        offset: Annotated[int | None, Field(description="Rows to skip.")] = None,
        include_superseded: Annotated[bool | None, Field(description="Also list superseded memories.")] = None,
        source: SourceFilter = None,
        tags: Tags = None,
        tags_any: TagsAny = None,
        metadata: MetadataFilter = None,
        created_after: CreatedAfter = None,
        created_before: CreatedBefore = None,
        min_confidence: MinConfidence = None,
        occurred_after: OccurredAfter = None,
        occurred_before: OccurredBefore = None,
    ) -> CallToolResult:
        """Your long-term memories, newest first, with `meta.total_count`."""
        filters = MemoryFilters(
            tags=tags,
            tags_any=tags_any,
            metadata=metadata,
            source=None,
            created_after=created_after,
            created_before=created_before,
            min_confidence=min_confidence,
            occurred_after=occurred_after,
            occurred_before=occurred_before,
        )
        return _call(
            lambda: client.memory_list(
                limit=limit, offset=offset, include_superseded=include_superseded, source=source, filters=filters
            )
        )

    @tool(_READ)
    def memory_get(id: MemoryId) -> CallToolResult:
        """One of your memories by id, live or superseded (`superseded_by` names its newer version)."""
        return _call(lambda: client.memory_get(id))

    @tool(_READ)
    def memory_history(id: MemoryId) -> CallToolResult:
        """A memory's versions, oldest first, up to the live one (the same whichever version you name)."""
        return _call(lambda: client.memory_history(id))

    @tool(_WRITE)
    def memory_correct(
        id: MemoryId,
        text: Annotated[str | None, Field(description="The corrected fact.")] = None,
        confidence: Annotated[float | None, Field(description="0..1.")] = None,
        tags: Annotated[list[str] | None, Field(description="The new labels (replace the old ones).")] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="The new metadata (replaces the old).")] = None,
    ) -> CallToolResult:
        """Correct one of your memories: writes a new live version with the fields you give (the rest carried
        over) and keeps the old one in its history. Use this, not forget + remember, when a fact changed.

        `already_superseded` means a newer version exists (`details.superseded_by`): correct that one instead."""
        return _call(lambda: client.memory_correct(id, text=text, confidence=confidence, tags=tags, metadata=metadata))

    @tool(_DELETE)
    def memory_forget(
        id: Annotated[str, Field(description="The memory's id (a UUID).")],
    ) -> CallToolResult:
        """Delete one of your long-term memories for good. To fix a wrong or outdated one, use memory_correct."""
        return _call(lambda: client.memory_forget(id))

    @tool(_WRITE)
    def memory_promote(
        session_id: Annotated[str, Field(description="The session whose turns to compile.")],
        wait: Annotated[
            bool | None,
            Field(description="Wait for the promotion to finish and return its job (status, counts, memory ids)."),
        ] = None,
        wait_seconds: Annotated[
            float | None,
            Field(
                description=f"Seconds to wait at most (default {DEFAULT_WAIT_SECONDS:g}, at most {MAX_WAIT_SECONDS:g})."
            ),
        ] = None,
    ) -> CallToolResult:
        """Compile a session's turns into long-term memories, asynchronously (202 enqueued).

        With wait=true, returns the promotion's job instead, once finished or when wait_seconds run out (then its
        status is still pending or running). Safe to repeat: an unchanged session is skipped without a compile.
        The hourly sweep does the same for every session."""

        def promote() -> JSONObject:
            enqueued = client.memory_promote(session_id)
            if not wait:
                return enqueued
            return client.wait_for_promotion(session_id, timeout=bounded_wait(wait_seconds))

        return _call(promote)

    @tool(_READ)
    def memory_promotion_status(
        session_id: Annotated[str, Field(description="The session you promoted (memory_promote).")],
    ) -> CallToolResult:
        """Your last promotion of a session: status (pending, running, succeeded, skipped_unchanged, failed,
        budget_exceeded), the compiler, counts (candidates, gated_out, quarantined, deduplicated, superseded,
        written) and the ids of the memories it wrote. A session you never promoted is not_found."""
        return _call(lambda: client.memory_promotion(session_id))

    @tool(_WRITE)
    def memory_graduate(
        memory_id: Annotated[str, Field(description="The memory's id (a UUID).")],
        re_scope: Annotated[
            Literal["inherit", "global"] | None,
            Field(description="inherit (default): keep the memory's project; global: make the article tenant-wide."),
        ] = None,
    ) -> CallToolResult:
        """Write one of your memories into the Knowledge Wiki as an article only you can see (deduplicated by
        the novelty gate)."""
        return _call(lambda: client.memory_graduate(memory_id=memory_id, re_scope=re_scope))

    @tool(_READ)
    def recall_context(
        query: Annotated[str, Field(description="What you are looking for (at most 500 characters).")],
        project_id: ProjectId = None,
        limit: Limit = None,
        session_id: Annotated[
            str | None,
            Field(description="Your session id: articles already shown to this session are replaced by new ones."),
        ] = None,
        tags: Tags = None,
        tags_any: TagsAny = None,
        metadata: MetadataFilter = None,
        source: SourceFilter = None,
        created_after: CreatedAfter = None,
        created_before: CreatedBefore = None,
        min_confidence: MinConfidence = None,
        occurred_after: OccurredAfter = None,
        occurred_before: OccurredBefore = None,
        mode: Mode = DEFAULT_RECALL_MODE,
    ) -> CallToolResult:
        """Memories and Knowledge Wiki articles for `query`, merged and deduplicated, with `meta.recall_id`.

        The memory filters (tags, metadata, …) narrow the memory half only. After answering, report the articles
        you used with recall_referenced."""
        filters = MemoryFilters(
            tags=tags,
            tags_any=tags_any,
            metadata=metadata,
            source=source,
            created_after=created_after,
            created_before=created_before,
            min_confidence=min_confidence,
            occurred_after=occurred_after,
            occurred_before=occurred_before,
        )
        return _call(
            lambda: client.recall_context(
                query=query,
                project_id=project_id,
                limit=limit,
                session_id=session_id,
                filters=filters,
                mode=mode,
            )
        )

    @tool(_WRITE)
    def recall_referenced(
        recall_id: Annotated[str, Field(description="`meta.recall_id` of the recall_context answer.")],
        article_ids: Annotated[list[str], Field(description="Ids of the surfaced articles you used (at most 50).")],
    ) -> CallToolResult:
        """Record which articles a recall_context answer surfaced were actually used."""
        return _call(lambda: client.recall_referenced(recall_id=recall_id, article_ids=article_ids))

    @tool(_READ)
    def resolve_project(
        slug: Annotated[str | None, Field(description="The project's slug.")] = None,
        repo_url: Annotated[
            str | None, Field(description="A git remote: git@host:owner/repo.git, https://host/owner/repo, owner/repo.")
        ] = None,
        name: Annotated[str | None, Field(description="The project's name.")] = None,
    ) -> CallToolResult:
        """The project for a slug, a repo URL or a name (tried in that order); use its `id` as project_id."""
        return _call(lambda: client.resolve_project(slug=slug, repo_url=repo_url, name=name))

    @tool(_READ)
    def knowledge_search(
        query: Annotated[str, Field(description="What you are looking for (at most 500 characters).")],
        mode: Annotated[
            Literal["keyword", "semantic", "combined"] | None, Field(description="Default combined.")
        ] = None,
        limit: Annotated[int | None, Field(description="1..50, default 10.")] = None,
        project_id: ProjectId = None,
    ) -> CallToolResult:
        """Knowledge Wiki articles for `query`: id, title, category, tags, score and a snippet."""
        return _call(lambda: client.knowledge_search(query=query, mode=mode, limit=limit, project_id=project_id))

    return server


def _call(action: Callable[[], JSONObject]) -> CallToolResult:
    """The API's JSON body as text; a LoopmemError as a tool error carrying its code and message."""
    try:
        body = action()
    except LoopmemError as exc:
        logger.info("tool call failed: %s", exc.code)
        return CallToolResult(content=[TextContent(text=json.dumps(exc.envelope()))], is_error=True)
    return CallToolResult(content=[TextContent(text=json.dumps(body))])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options shared by `python -m agent.mcp_server` and `manage.py mcp`."""
    parser.add_argument("--transport", choices=TRANSPORTS, default="stdio", help="default: stdio")
    parser.add_argument("--host", default="127.0.0.1", help="streamable-http: interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="streamable-http: port (default 8765)")


def serve(config: AgentConfig, *, transport: str = "stdio", host: str = "127.0.0.1", port: int = 8765) -> int:
    """Run the server until its transport closes; 2 when the configuration cannot work."""
    if not config.agent_key:
        sys.stderr.write("loopmem MCP server: LOOPMEM_AGENT_KEY is not set (an agent API key)\n")
        return 2
    try:
        client = LoopmemClient(config.url, config.agent_key, timeout=config.timeout_seconds)
    except ValueError as exc:
        sys.stderr.write(f"loopmem MCP server: LOOPMEM_URL: {exc}\n")
        return 2
    server = build_server(client)
    if transport == "streamable-http":
        # Anyone who can reach this port acts as the agent key: keep it on loopback unless it is fronted by auth.
        sys.stderr.write(f"loopmem MCP server on http://{host}:{port}/mcp, API {client.base_url}\n")
        server.run("streamable-http", host=host, port=port)
    else:
        server.run("stdio")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m agent.mcp_server [--transport stdio|streamable-http] [--host H] [--port P]`."""
    parser = argparse.ArgumentParser(prog="python -m agent.mcp_server", description=DESCRIPTION)
    add_arguments(parser)
    options = parser.parse_args(argv)
    try:
        config = agent_config_from_env()
    except AgentConfigError as exc:
        sys.stderr.write(f"loopmem MCP server: {exc}\n")
        return 2
    return serve(config, transport=options.transport, host=options.host, port=options.port)


if __name__ == "__main__":
    sys.exit(main())
