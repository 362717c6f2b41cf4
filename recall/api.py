"""HTTP: POST /api/v1/recall (merged recall) and POST /api/v1/recall/:recall_id/referenced."""

from __future__ import annotations

from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from knowledge.visibility import viewer_for
from loopmem.http.base_view import ScopedViewSet
from loopmem.http.inputs import json_object, parse, parse_body
from recall import envelopes, services
from recall.schema import recall_schema
from recall.serializers import RecallContextIn, ReferencedIn


@recall_schema
class RecallViewSet(ScopedViewSet):
    """The one call an agent makes at the start of a task."""

    # Merged recall is a read sent as POST: it goes on during a custody halt. `referenced` is a write.
    halt_exempt_actions = ("create",)

    def create(self, request: Request) -> Response:
        args = parse_body(RecallContextIn, request)
        context = services.recall_context(
            scope=self.scope_in(args.pop("project_id"), args["session_id"]),
            viewer=viewer_for(self.principal, self.scope),
            tenant=self.principal.require_tenant(),
            api_key_id=self.principal.api_key.id,
            **args,
        )
        return Response(envelopes.recall(context))

    @action(detail=False, methods=["post"], url_path=r"(?P<recall_id>[^/]+)/referenced")
    def referenced(self, request: Request, recall_id: str) -> Response:
        args = parse(ReferencedIn, {**json_object(request), "recall_id": recall_id})
        recorded = services.recall_referenced(
            tenant_id=self.scope.tenant_id, api_key_id=self.principal.api_key.id, **args
        )
        return Response(envelopes.referenced(recorded))
