"""HTTP: /api/v1/memory (remember, list), /api/v1/memory/:id (forget), recall, promote, graduate, sessions."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from knowledge import envelopes as knowledge_envelopes
from loopmem.envelopes import paginated
from loopmem.inputs import json_object, parse, parse_body
from loopmem.models import ApiKey
from loopmem.params import page_params
from loopmem.views import ScopedViewSet
from memory import envelopes, graduation, recall_modes, selectors, services
from memory.promotion import jobs as promotion
from memory.serializers import (
    GraduateIn,
    MemoryListIn,
    MemoryOut,
    PromoteIn,
    RecallIn,
    RememberIn,
    SessionIdIn,
    SessionTurnIn,
    SessionTurnOut,
    TierIn,
)


class MemoryViewSet(ScopedViewSet):
    """The calling subject's memories. Tenant and subject come from the key; body fields cannot set them."""

    lookup_value_regex = "[^/]+"
    # Recall is a read sent as POST: it goes on during a custody halt.
    halt_exempt_actions = ("recall",)

    @extend_schema(request=RememberIn, responses={201: MemoryOut})
    def create(self, request: Request) -> Response:
        body = json_object(request)
        target = parse(TierIn, body)
        scope = self.scope_in(target["project_id"])
        if target["tier"] == "session":
            turn = services.session_append(scope=scope, **parse(SessionTurnIn, body))
            return Response({"data": SessionTurnOut(turn).data}, status=status.HTTP_201_CREATED)
        memory = services.memory_remember(scope=scope, **parse(RememberIn, body))
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
        params = parse(MemoryListIn, request.query_params)
        limit, offset = page_params(request.query_params)
        filters = {"include_superseded": params["include_superseded"], "source": params["source"]}
        if params["all_subjects"] and self.principal.role == ApiKey.Role.SUPERADMIN:
            rows = selectors.memory_list_all_subjects(tenant_id=self.principal.require_tenant().id, **filters)
        else:
            # A non-superadmin's all_subjects is ignored: the list stays on its own subject.
            rows = selectors.memory_list(scope=self.scope, **filters)
        page = list(rows[offset : offset + limit])
        return Response(
            paginated(MemoryOut(page, many=True).data, total_count=rows.count(), limit=limit, offset=offset)
        )

    def destroy(self, request: Request, pk: str) -> Response:
        if self.principal.role == ApiKey.Role.SUPERADMIN:
            memory_id = services.memory_forget_any(tenant_id=self.principal.require_tenant().id, memory_id=pk)
        else:
            memory_id = services.memory_forget(scope=self.scope, memory_id=pk)
        return Response({"data": {"id": str(memory_id), "deleted": True}})

    @extend_schema(
        parameters=[OpenApiParameter("limit", int), OpenApiParameter("offset", int)],
        responses={200: SessionTurnOut(many=True)},
    )
    @action(detail=False, methods=["get"], url_path=r"sessions/(?P<session_id>.+)")
    def session(self, request: Request, session_id: str) -> Response:
        """A session's unexpired turns in insertion order, for an agent resuming it."""
        parse(SessionIdIn, {"session_id": session_id})
        limit, offset = page_params(request.query_params)
        history = selectors.session_history(scope=self.scope, session_id=session_id, limit=limit, offset=offset)
        turns = SessionTurnOut(history.results, many=True).data
        return Response(paginated(turns, total_count=history.total_count, limit=limit, offset=offset))

    @extend_schema(request=None, responses={202: None})
    @action(detail=False, methods=["post"])
    def promote(self, request: Request) -> Response:
        """Compile a session into long-term memories, asynchronously. No job id: it would leak a global counter."""
        session_id = parse_body(PromoteIn, request)["session_id"]
        promotion.promotion_request(scope=self.scope, session_id=session_id)
        return Response({"data": {"session_id": session_id, "status": "enqueued"}}, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={200: None})
    @action(detail=False, methods=["post"])
    def recall(self, request: Request) -> Response:
        args = parse_body(RecallIn, request)
        scope = self.scope_in(args.pop("project_id"))
        result = recall_modes.memory_recall_in_mode(scope=scope, tenant=self.principal.require_tenant(), **args)
        services.memory_note_recalled(
            tenant_id=scope.tenant_id, result=result, include_superseded=args["include_superseded"]
        )
        return Response(envelopes.recall(result))

    @extend_schema(request=None, responses={200: None, 201: None})
    @action(detail=False, methods=["post"])
    def graduate(self, request: Request) -> Response:
        """Propose one of your memories as an owner-visible knowledge article, through the novelty gate."""
        args = parse_body(GraduateIn, request)  # input is checked before the scope is resolved
        proposal = graduation.memory_graduate(scope=self.scope, **args)
        return Response(
            knowledge_envelopes.proposal(verdict=proposal.verdict, created=proposal.created, article=proposal.article),
            status=status.HTTP_201_CREATED if proposal.created else status.HTTP_200_OK,
        )
