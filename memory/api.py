"""HTTP: /api/v1/memory (remember, list), /api/v1/memory/:id (get, correct, forget, history), recall, batch,
export and import, promote (and its job), graduate, sessions."""

from __future__ import annotations

import json
from typing import Any

from django.http import StreamingHttpResponse
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from knowledge import envelopes as knowledge_envelopes
from loopmem.errors import PayloadTooLarge, ValidationFailed
from loopmem.http.base_view import ScopedViewSet
from loopmem.http.envelopes import paginated, with_redactions
from loopmem.http.error_responses import as_domain_error, error_body
from loopmem.http.inputs import json_object, parse, parse_body
from loopmem.http.ratelimit import ApiKeyRateThrottle
from loopmem.params import page_params
from loopmem.secret_guard.policy import SecretReport
from loopmem.tenancy.audit import Actor
from memory import envelopes, graduation, reach, selectors, services, session_tier
from memory.import_body import MAX_IMPORT_BYTES, import_rows
from memory.importing import memory_import_within_quota
from memory.promotion import jobs as promotion
from memory.recall_counted import memory_recall_counted
from memory.schema import memory_schema
from memory.serializers import (
    BatchIn,
    ExportIn,
    GraduateIn,
    MemoryListIn,
    MemoryPatchIn,
    PromoteIn,
    RecallIn,
    RememberIn,
    SessionIdIn,
    SessionTurnIn,
    SessionTurnOut,
    TierIn,
)


class NDJSONRenderer(BaseRenderer):
    """Lets a client ask for `application/x-ndjson` (the export); an error still renders as one JSON object."""

    media_type = envelopes.EXPORT_CONTENT_TYPE
    format = "ndjson"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return b"" if data is None else json.dumps(data).encode() + b"\n"


@memory_schema
class MemoryViewSet(ScopedViewSet):
    """The calling subject's memories. Tenant and subject come from the key; body fields cannot set them."""

    lookup_value_regex = "[^/]+"
    # Recall is a read sent as POST: it goes on during a custody halt.
    halt_exempt_actions = ("recall",)

    def create(self, request: Request) -> Response:
        return self.idempotent(request, "remember", lambda: self._create(request))

    def _create(self, request: Request) -> Response:
        redacted = SecretReport()  # the tenant's secret policy: `meta.redacted` only when it redacted
        data = self._remember(json_object(request), redacted)
        return Response(with_redactions({"data": data}, redacted), status=status.HTTP_201_CREATED)

    def _remember(self, body: dict[str, Any], redacted: SecretReport) -> Any:
        """One remember body (either tier) written under the tenant's secret policy: the `data` of its 201."""
        target = parse(TierIn, body)
        scope = self.scope_in(target["project_id"])
        if target["tier"] == "session":
            turn = session_tier.session_append(scope=scope, report=redacted, **parse(SessionTurnIn, body))
            return SessionTurnOut(turn).data
        memory = services.memory_remember(scope=scope, report=redacted, **parse(RememberIn, body))
        return envelopes.memory_data(memory)

    def list(self, request: Request) -> Response:
        params = parse(MemoryListIn, request.query_params)
        limit, offset = page_params(request.query_params)
        rows = reach.memory_list_reached(
            principal=self.principal,
            all_subjects=params["all_subjects"],
            include_superseded=params["include_superseded"],
            filters=params["filters"],
        )
        page = list(rows[offset : offset + limit])
        return Response(
            paginated(
                [envelopes.memory_data(memory) for memory in page], total_count=rows.count(), limit=limit, offset=offset
            )
        )

    def retrieve(self, request: Request, pk: str) -> Response:
        """One memory, live or superseded (superseded rows are kept for audit)."""
        memory = reach.memory_get_reached(principal=self.principal, memory_id=pk)
        return Response({"data": envelopes.memory_data(memory)})

    def partial_update(self, request: Request, pk: str) -> Response:
        """Correct a memory: a new live version with the given fields replacing the old ones, linked by supersede.

        The old row is never changed but for its `superseded_by`; the new one keeps its project and source."""
        changes = parse_body(MemoryPatchIn, request)
        redacted = SecretReport()
        actor = Actor.of(self.principal, "PATCH /api/v1/memory/:id")
        memory = services.memory_correct(scope=self.scope, memory_id=pk, report=redacted, actor=actor, **changes)
        return Response(with_redactions({"data": envelopes.memory_data(memory)}, redacted))

    @action(detail=True, methods=["get"])
    def history(self, request: Request, pk: str) -> Response:
        """The memory's supersede chain, oldest first, up to the live version, whichever member is asked for."""
        chain = reach.memory_history_reached(principal=self.principal, memory_id=pk)
        return Response({"data": [envelopes.memory_data(memory) for memory in chain]})

    def destroy(self, request: Request, pk: str) -> Response:
        actor = Actor.of(self.principal, "DELETE /api/v1/memory/:id")
        memory_id = reach.memory_forget_reached(principal=self.principal, memory_id=pk, actor=actor)
        return Response({"data": {"id": str(memory_id), "deleted": True}})

    @action(detail=False, methods=["get"], url_path=r"sessions/(?P<session_id>.+)")
    def session(self, request: Request, session_id: str) -> Response:
        """A session's unexpired turns in insertion order, for an agent resuming it."""
        parse(SessionIdIn, {"session_id": session_id})
        limit, offset = page_params(request.query_params)
        history = selectors.session_history(scope=self.scope, session_id=session_id, limit=limit, offset=offset)
        turns = SessionTurnOut(history.results, many=True).data
        return Response(paginated(turns, total_count=history.total_count, limit=limit, offset=offset))

    @action(detail=False, methods=["post"])
    def promote(self, request: Request) -> Response:
        """Compile a session into long-term memories, asynchronously. No job id: it would leak a global counter."""
        session_id = parse_body(PromoteIn, request)["session_id"]
        promotion.promotion_request(scope=self.scope, session_id=session_id)
        return Response({"data": {"session_id": session_id, "status": "enqueued"}}, status=status.HTTP_202_ACCEPTED)

    @action(detail=False, methods=["get"], url_path=r"promote/(?P<session_id>.+)")
    def promotion(self, request: Request, session_id: str) -> Response:
        """Your last promotion job for one of your sessions: status, compiler, counts, written memory ids."""
        parse(PromoteIn, {"session_id": session_id})  # the same rule as the promote it watches
        return Response(envelopes.promotion_job(promotion.promotion_status(scope=self.scope, session_id=session_id)))

    @action(detail=False, methods=["post"])
    def recall(self, request: Request) -> Response:
        args = parse_body(RecallIn, request)
        scope = self.scope_in(args.pop("project_id"))
        result = memory_recall_counted(scope=scope, tenant=self.principal.require_tenant(), **args)
        return Response(envelopes.recall(result))

    @action(detail=False, methods=["post"])
    def graduate(self, request: Request) -> Response:
        """Propose one of your memories as an owner-visible knowledge article, through the novelty gate."""
        args = parse_body(GraduateIn, request)  # input is checked before the scope is resolved
        proposal = graduation.memory_graduate(scope=self.scope, **args)
        return Response(
            knowledge_envelopes.proposal(verdict=proposal.verdict, created=proposal.created, article=proposal.article),
            status=status.HTTP_201_CREATED if proposal.created else status.HTTP_200_OK,
        )

    @action(detail=False, methods=["post"])
    def batch(self, request: Request) -> Response:
        """Remember up to 100 bodies (either tier), each validated and written on its own, in order.

        One bad item never loses the others. Each item counts against the quota and the rate limits. With an
        `Idempotency-Key` the batch is one transaction, recorded with its answer."""
        return self.idempotent(request, "batch", lambda: self._batch(request))

    def _batch(self, request: Request) -> Response:
        items = parse_body(BatchIn, request)["memories"]
        results = [self._batch_item(request, index, item) for index, item in enumerate(items)]
        created = sum(1 for result in results if result["status"] == status.HTTP_201_CREATED)
        return Response({"data": results, "meta": {"created": created, "failed": len(results) - created}})

    def _batch_item(self, request: Request, index: int, item: Any) -> dict[str, Any]:
        try:
            if index > 0:  # the request itself was counted for the first item
                ApiKeyRateThrottle().allow_request(request, self)
            if not isinstance(item, dict):
                raise ValidationFailed(details={"memory": ["must be an object"]})
            redacted = SecretReport()
            written = {"index": index, "status": status.HTTP_201_CREATED, "memory": self._remember(item, redacted)}
            return with_redactions(written, redacted)  # an item's `meta.redacted`, as on a single write
        except Exception as exc:
            error = as_domain_error(exc)
            if error is None:
                raise
            body = error_body(error.status, error.code, error.message, error.details)
            return {"index": index, "status": error.status, "error": body["error"]}

    @action(detail=False, methods=["get"], renderer_classes=[JSONRenderer, NDJSONRenderer])
    def export(self, request: Request) -> StreamingHttpResponse:
        """Stream your live memories (or all versions) as NDJSON, with their provenance; `import` reads it back."""
        params = parse(ExportIn, request.query_params)
        rows = selectors.memory_export_rows(scope=self.scope, include_superseded=params["include_superseded"])
        response = StreamingHttpResponse(envelopes.export_lines(rows), content_type=envelopes.EXPORT_CONTENT_TYPE)
        response["Content-Disposition"] = 'attachment; filename="memories.ndjson"'
        return response

    @action(detail=False, methods=["post"], url_path="import", url_name="import", max_body_bytes=MAX_IMPORT_BYTES)
    def import_memories(self, request: Request) -> Response:
        """Import memories from NDJSON or a JSON array (≤ 10 MB), e.g. an export: supersede chains are rebuilt,
        and a memory you already hold (same text and chain) is skipped, so importing twice adds nothing."""
        rows = import_rows(_read_body(request, MAX_IMPORT_BYTES))
        report = memory_import_within_quota(scope=self.scope, rows=rows)
        return Response({"data": report.as_dict()})


def _read_body(request: Request, limit: int) -> bytes:
    """The raw request body, at most `limit` bytes (413 past it), read past Django's form-size cap."""
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(details={"max_bytes": limit})
    raw: bytes = request._request.read(limit + 1)
    if len(raw) > limit:
        raise PayloadTooLarge(details={"max_bytes": limit})
    return raw
