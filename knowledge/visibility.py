"""Who reads articles: the viewer, derived from the authenticated key and nothing else."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from loopmem.models import ApiKey
from loopmem.tenancy.principal import Principal
from loopmem.tenancy.scope import Scope, scope_for


@dataclass(frozen=True)
class Viewer:
    """The tenant and subject an article read or write acts as.

    `sees_all` is true for user, orchestrator and (impersonating) superadmin keys: they curate the whole
    tenant's wiki. An agent sees published shared articles plus every article it owns.
    """

    tenant_id: uuid.UUID
    subject_id: str
    sees_all: bool = False


def viewer_for(principal: Principal, scope: Scope | None = None) -> Viewer:
    """The viewer of a request (of its already resolved `scope`, if given). A tenant-less superadmin must
    impersonate (422 impersonation_tenant_required)."""
    scope = scope or scope_for(principal)
    return Viewer(tenant_id=scope.tenant_id, subject_id=scope.subject_id, sees_all=principal.role != ApiKey.Role.AGENT)


def viewer_for_scope(scope: Scope) -> Viewer:
    """A memory scope reading knowledge (graduation, cross-link checks): what an agent with that subject sees."""
    return Viewer(tenant_id=scope.tenant_id, subject_id=scope.subject_id, sees_all=False)
