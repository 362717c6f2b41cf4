"""HTTP: POST /api/v1/recall (merged recall) and POST /api/v1/recall/:recall_id/referenced."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from knowledge.api import search_envelope
from knowledge.visibility import viewer_for
from loopmem.auth import principal_of
from loopmem.errors import InvalidQuery, InvalidSessionId, QueryTooLong
from loopmem.outcome import outcome_for
from loopmem.params import lenient_int
from loopmem.request_body import json_object
from loopmem.scope import scope_for
from memory.api import recall_envelope
from memory.models import MAX_SESSION_ID_BYTES
from memory.serializers import MemoryOut
from projects.project_ids import parse_project_id
from recall import services
from recall.services import MergedItem, RecallContext

MAX_QUERY_CHARS = 500


class RecallViewSet(viewsets.ViewSet):
    """The one call an agent makes at the start of a task."""

    # Merged recall is a read sent as POST: it goes on during a custody halt. `referenced` is a write.
    halt_exempt_actions = ("create",)

    @extend_schema(request=None, responses={200: None})
    def create(self, request: Request) -> Response:
        body = json_object(request)
        # Every input is checked before anything is embedded.
        project_id = parse_project_id(body.get("project_id"))
        query = _query(body.get("query"))
        session_id = _session_id(body.get("session_id"))
        principal = principal_of(request)
        scope = scope_for(principal, project_id=project_id, session_id=session_id)
        context = services.recall_context(
            scope=scope,
            viewer=viewer_for(principal),
            tenant=principal.require_tenant(),
            api_key_id=principal.api_key.id,
            query=query,
            limit=lenient_int(body.get("limit"), services.DEFAULT_LIMIT),
            session_id=session_id,
        )
        return Response(render(context))

    @extend_schema(request=None, responses={200: None})
    @action(detail=False, methods=["post"], url_path=r"(?P<recall_id>[^/]+)/referenced")
    def referenced(self, request: Request, recall_id: str) -> Response:
        body = json_object(request)
        project_id = parse_project_id(body.get("project_id"))
        principal = principal_of(request)
        tenant = scope_for(principal).tenant_id
        recorded = services.recall_referenced(
            tenant_id=tenant,
            api_key_id=principal.api_key.id,
            recall_id=recall_id,
            article_ids=body.get("article_ids"),
            project_id=project_id,
        )
        return Response(
            {
                "data": {
                    "recall_id": str(recorded.recall_id),
                    "article_ids": recorded.article_ids,
                    "recorded": recorded.recorded,
                }
            }
        )


def render(context: RecallContext) -> dict[str, Any]:
    """The /recall body (reference §2.7): merged items, the untouched per-source envelopes, and the ledger meta."""
    knowledge = context.knowledge
    memory_envelope = recall_envelope(context.memory)
    # The merged memory items are hits of the memory half: reuse its serialized rows (one serializer for all).
    serialized = {
        str(hit.memory.id): row["memory"] for hit, row in zip(context.memory.hits, memory_envelope["data"], strict=True)
    }
    data = [_item(item, serialized) for item in context.items]
    knowledge_envelope = _knowledge_envelope(context)
    meta: dict[str, Any] = {
        "query": context.query,
        "project_id": str(context.project_id) if context.project_id else None,
        "total_count": len(data),
        "memory_count": len(context.memory_items),
        "knowledge_count": len(knowledge.selected),
        "degraded": context.degraded,
        "degraded_reason": context.degraded_reason,
        "search_mode": context.search_mode,
        "results_ranking": "heuristic_cross_source",
        "answer_confidence": context.answer_confidence,
        "recall_id": str(context.recall_id),
        "candidates_considered": {
            "memory": len(context.memory_items),
            "knowledge": len(knowledge.pool),
            "total": len(context.memory_items) + len(knowledge.pool),
        },
        "selected_count": len(data),
        "tokens_selected": context.tokens_selected,
        "tokens_candidates": context.tokens_candidates,
        "tokens_saved_vs_candidates": max(context.tokens_candidates - context.tokens_selected, 0),
        "diversity": knowledge.diversity.as_meta() if knowledge.diversity else None,
    }
    # The outcome reads both halves' reasons: the memory half's `reason` and the knowledge half's fallback.
    meta["outcome"] = outcome_for(
        {**meta, "reason": context.memory.reason, "fallback_reason": knowledge.fallback_reason}, count=len(data)
    )
    return {"data": data, "memory": memory_envelope, "knowledge": knowledge_envelope, "meta": meta}


def _item(item: MergedItem, serialized_memories: dict[str, Any]) -> dict[str, Any]:
    common = {
        "source": item.source,
        "score": item.score,
        "rank": item.rank,
        "selection_reason": item.selection_reason,
        "tokens_estimate": item.tokens_estimate,
    }
    if item.memory is not None:
        found = serialized_memories.get(item.id)
        return {**common, "memory": found if found is not None else MemoryOut(item.memory).data}
    assert item.hit is not None
    article = item.hit.article
    summary = {
        "id": str(article.id),
        "title": article.title,
        "category": article.category,
        "tags": list(article.tags),
        "score": item.score,
        "snippet": getattr(article, "snippet", ""),
    }
    return {**common, "article": summary}


def _knowledge_envelope(context: RecallContext) -> dict[str, Any]:
    """The diversified SELECTED set (≤ limit), with the search meta plus `degraded`; `limit` is the caller's."""
    knowledge = context.knowledge
    if knowledge.result is None:
        meta: dict[str, Any] = {
            "total_count": 0,
            "limit": context.limit,
            "offset": 0,
            "degraded": True,
            "fallback": True,
            "fallback_reason": knowledge.fallback_reason,
            "search_id": str(context.recall_id),
        }
        meta["outcome"] = outcome_for(meta, count=0)
        return {"data": [], "meta": meta}
    searched = search_envelope(knowledge.result)
    scores = {item.id: item.score for item in knowledge.selected}
    rows = [
        {**row, "score": scores[row["id"]]}
        for row in sorted(
            (row for row in searched["data"] if row["id"] in scores),
            key=lambda row: (-(scores[row["id"]] or 0.0), row["id"]),
        )
    ]
    meta = {**searched["meta"], "limit": context.limit, "degraded": knowledge.degraded}
    meta["diversity"] = knowledge.diversity.as_meta() if knowledge.diversity else None
    meta["outcome"] = outcome_for(meta, count=len(rows))
    return {"data": rows, "meta": meta}


def _query(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidQuery("The `query` field must be a non-blank string.")
    query = value.strip()
    if len(query) > MAX_QUERY_CHARS:
        raise QueryTooLong()
    return query


def _session_id(value: object) -> str | None:
    """Optional and opaque; a non-string or one over 200 bytes is refused, never truncated."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value.encode()) > MAX_SESSION_ID_BYTES:
        raise InvalidSessionId()
    return value.strip() or None
