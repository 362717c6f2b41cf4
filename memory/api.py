"""HTTP: /api/v1/memory (remember, list), /api/v1/memory/:id (forget), /api/v1/memory/recall."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from knowledge.serializers import ArticleSummaryOut
from loopmem.auth import principal_of
from loopmem.errors import (
    InvalidMemoryId,
    InvalidQuery,
    InvalidReScope,
    InvalidSessionId,
    MissingSessionId,
    ValidationFailed,
)
from loopmem.models import ApiKey
from loopmem.outcome import outcome_for
from loopmem.pagination import page_params
from loopmem.params import canonical_uuid, lenient_int, truthy
from loopmem.request_body import json_object
from loopmem.scope import scope_for
from memory import graduation, selectors, services
from memory.models import MAX_SESSION_ID_BYTES
from memory.promotion import jobs as promotion
from memory.selectors import RecallResult
from memory.serializers import MemoryOut, RememberIn, SessionTurnIn, SessionTurnOut, validate_session_id
from projects.project_ids import parse_project_id

TIERS = ("long_term", "session")


class MemoryViewSet(viewsets.ViewSet):
    """The calling subject's memories. Tenant and subject come from the key; body fields cannot set them."""

    lookup_value_regex = "[^/]+"
    # Recall is a read sent as POST: it goes on during a custody halt.
    halt_exempt_actions = ("recall",)

    @extend_schema(request=RememberIn, responses={201: MemoryOut})
    def create(self, request: Request) -> Response:
        body = json_object(request)
        project_id = parse_project_id(body.get("project_id"))
        principal = principal_of(request)
        scope = scope_for(principal, project_id=project_id)
        tier = body.get("tier") or "long_term"
        if tier not in TIERS:
            raise ValidationFailed(details={"tier": [f"must be one of {', '.join(TIERS)}"]})
        if tier == "session":
            turn_in = SessionTurnIn(data=body)
            turn_in.is_valid(raise_exception=True)
            turn = services.session_append(scope=scope, **turn_in.validated_data)
            return Response({"data": SessionTurnOut(turn).data}, status=status.HTTP_201_CREATED)
        memory_in = RememberIn(data=body)
        memory_in.is_valid(raise_exception=True)
        memory = services.memory_remember(scope=scope, **memory_in.validated_data)
        return Response({"data": MemoryOut(memory).data}, status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[
            OpenApiParameter("limit", int),
            OpenApiParameter("offset", int),
            OpenApiParameter("include_superseded", bool),
            OpenApiParameter("source", str, enum=["explicit", "promoted"]),
            OpenApiParameter("all_subjects", bool, description="superadmin oversight: every subject of the tenant"),
        ],
        responses={200: MemoryOut(many=True)},
    )
    def list(self, request: Request) -> Response:
        principal = principal_of(request)
        params = request.query_params
        limit, offset = page_params(params)
        filters: dict[str, Any] = {
            "include_superseded": truthy(params.get("include_superseded")),
            "source": params.get("source"),
        }
        if truthy(params.get("all_subjects")) and principal.role == ApiKey.Role.SUPERADMIN:
            rows = selectors.memory_list_all_subjects(tenant_id=principal.require_tenant().id, **filters)
        else:
            # A non-superadmin's all_subjects is ignored: the list stays on its own subject.
            rows = selectors.memory_list(scope=scope_for(principal), **filters)
        page = list(rows[offset : offset + limit])
        meta: dict[str, Any] = {"total_count": rows.count(), "limit": limit, "offset": offset}
        meta["outcome"] = outcome_for(meta, count=len(page), offset=offset)
        return Response({"data": MemoryOut(page, many=True).data, "meta": meta})

    def destroy(self, request: Request, pk: str) -> Response:
        principal = principal_of(request)
        if principal.role == ApiKey.Role.SUPERADMIN:
            memory_id = services.memory_forget_any(tenant_id=principal.require_tenant().id, memory_id=pk)
        else:
            memory_id = services.memory_forget(scope=scope_for(principal), memory_id=pk)
        return Response({"data": {"id": str(memory_id), "deleted": True}})

    @extend_schema(
        parameters=[OpenApiParameter("limit", int), OpenApiParameter("offset", int)],
        responses={200: SessionTurnOut(many=True)},
    )
    @action(detail=False, methods=["get"], url_path=r"sessions/(?P<session_id>.+)")
    def session(self, request: Request, session_id: str) -> Response:
        """A session's unexpired turns in insertion order, for an agent resuming it."""
        try:
            validate_session_id(session_id)
        except DRFValidationError as exc:
            raise ValidationFailed(details={"session_id": list(exc.detail)}) from exc
        limit, offset = page_params(request.query_params)
        history = selectors.session_history(
            scope=scope_for(principal_of(request)), session_id=session_id, limit=limit, offset=offset
        )
        meta: dict[str, Any] = {"total_count": history.total_count, "limit": limit, "offset": offset}
        meta["outcome"] = outcome_for(meta, count=len(history.results), offset=offset)
        return Response({"data": SessionTurnOut(history.results, many=True).data, "meta": meta})

    @extend_schema(request=None, responses={202: None})
    @action(detail=False, methods=["post"])
    def promote(self, request: Request) -> Response:
        """Compile a session into long-term memories, asynchronously. No job id: it would leak a global counter."""
        session_id = json_object(request).get("session_id")
        if not isinstance(session_id, str) or not session_id.strip():
            raise MissingSessionId()
        if len(session_id.encode()) > MAX_SESSION_ID_BYTES:
            raise InvalidSessionId()
        promotion.promotion_request(scope=scope_for(principal_of(request)), session_id=session_id)
        return Response({"data": {"session_id": session_id, "status": "enqueued"}}, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={200: None})
    @action(detail=False, methods=["post"])
    def recall(self, request: Request) -> Response:
        body = json_object(request)
        project_id = parse_project_id(body.get("project_id"))
        query = body.get("query")
        if query is None:
            query = ""
        if not isinstance(query, str):
            raise InvalidQuery()
        principal = principal_of(request)
        scope = scope_for(principal, project_id=project_id)
        include_superseded = truthy(body.get("include_superseded"))
        result = selectors.memory_recall(
            scope=scope,
            tenant=principal.require_tenant(),
            query=query,
            limit=lenient_int(body.get("limit"), selectors.DEFAULT_RECALL_K),
            include_superseded=include_superseded,
        )
        services.memory_note_recalled(tenant_id=scope.tenant_id, result=result, include_superseded=include_superseded)
        return Response(recall_envelope(result))

    @extend_schema(request=None, responses={200: None, 201: None})
    @action(detail=False, methods=["post"])
    def graduate(self, request: Request) -> Response:
        """Propose one of your memories as an owner-visible knowledge article, through the novelty gate."""
        body = json_object(request)
        memory_id, re_scope = body.get("memory_id"), body.get("re_scope")
        # Input is checked before the scope is resolved.
        parsed_id = canonical_uuid(memory_id)
        if parsed_id is None:
            raise InvalidMemoryId()
        if re_scope not in (None, "inherit", "global"):
            raise InvalidReScope()
        proposal = graduation.memory_graduate(
            scope=scope_for(principal_of(request)),
            memory_id=str(canonical_uuid(memory_id)),
            re_scope=re_scope or "inherit",
        )
        article = ArticleSummaryOut(proposal.article).data if proposal.article is not None else None
        return Response(
            {"data": {"verdict": proposal.verdict, "created": proposal.created, "article": article}},
            status=status.HTTP_201_CREATED if proposal.created else status.HTTP_200_OK,
        )


def recall_envelope(result: RecallResult) -> dict[str, Any]:
    """{data: [{memory, score}], meta} (reference §2.2); ann_iterative_scan only when the ANN index ran."""
    # One serializer over all hits: per-hit serializers cost ~5x as much (measured in bench_recall).
    memories = MemoryOut([hit.memory for hit in result.hits], many=True).data
    data = [{"memory": memory, "score": hit.score} for memory, hit in zip(memories, result.hits, strict=True)]
    meta: dict[str, Any] = {
        "total_count": len(data),
        "fallback": result.fallback,
        "reason": result.reason,
        "underfilled": result.underfilled,
    }
    if result.recall_path is not None:
        meta["recall_path"] = result.recall_path
    if result.ann_iterative_scan is not None:
        meta["ann_iterative_scan"] = result.ann_iterative_scan
        if result.ann_iterative_scan_reason:
            meta["ann_iterative_scan_reason"] = result.ann_iterative_scan_reason
    meta["outcome"] = outcome_for(meta, count=len(data))
    return {"data": data, "meta": meta}
