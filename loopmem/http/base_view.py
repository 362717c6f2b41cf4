"""The base of every API view: the caller resolved once per request, its scope derived once, on first use."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import replace
from functools import cached_property
from typing import Any

from django.db import transaction
from rest_framework import viewsets
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from loopmem.http import idempotency
from loopmem.http.auth import principal_of
from loopmem.tenancy.principal import Principal
from loopmem.tenancy.scope import Scope, scope_for


class ScopedViewSet(viewsets.ViewSet):
    """`self.principal` once authentication passed; `self.scope` (tenant and subject, from the key only)."""

    principal: Principal
    # A route's own request-body limit (`@action(max_body_bytes=N)`); None is the deployment's (loopmem.http.edge).
    max_body_bytes: int | None = None

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        self.principal = principal_of(request)

    @cached_property
    def scope(self) -> Scope:
        # Lazy: each endpoint checks its input before the scope (a tenant-less superadmin's 422) is resolved.
        return scope_for(self.principal)

    def scope_in(self, project_id: uuid.UUID | None, session_id: str | None = None) -> Scope:
        """The request's scope narrowed to a project (and session): same tenant and subject, always."""
        return replace(self.scope, project_id=project_id, session_id=session_id)

    def idempotent(self, request: Request, operation: str, respond: Callable[[], Response]) -> Response:
        """`respond()`, made safe to retry under the request's `Idempotency-Key` (loopmem.http.idempotency): the first
        answer is recorded with the write, in its transaction, and a retry gets it back with
        `Idempotent-Replayed: true`. Without the header, exactly `respond()`."""
        raw_key = request.headers.get(idempotency.HEADER)
        if raw_key is None:
            return respond()
        key = idempotency.parse_key(raw_key)
        owner: dict[str, Any] = {"tenant_id": self.scope.tenant_id, "subject_id": self.scope.subject_id, "key": key}
        digest = idempotency.request_hash(operation, request.data)
        with transaction.atomic():
            stored = idempotency.claim(**owner, operation=operation, digest=digest)
            if stored is not None:
                replay = Response(stored.body, status=stored.status)
                replay[idempotency.REPLAYED_HEADER] = "true"
                return replay
            response = respond()
            # Stored as the client received it (rendered JSON), so a replay is the same document.
            body = json.loads(JSONRenderer().render(response.data))
            idempotency.record(**owner, status=response.status_code, body=body)
        return response
