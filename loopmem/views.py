"""The base of every API view: the caller resolved once per request, its scope derived once, on first use."""

from __future__ import annotations

import uuid
from dataclasses import replace
from functools import cached_property
from typing import Any

from rest_framework import viewsets
from rest_framework.request import Request

from loopmem.auth import principal_of
from loopmem.principal import Principal
from loopmem.scope import Scope, scope_for


class ScopedViewSet(viewsets.ViewSet):
    """`self.principal` once authentication passed; `self.scope` (tenant and subject, from the key only)."""

    principal: Principal
    # A route's own request-body limit (`@action(max_body_bytes=N)`); None is the deployment's (loopmem.edge).
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
