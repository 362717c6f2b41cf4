"""How far a caller reaches into long-term memory: its own subject; a superadmin, every subject of its tenant.

The role decides the rows here, once, so no view branches on it. Listing crosses subjects only when asked
(`all_subjects`); addressing one memory by id (get, history, forget) reaches the superadmin's whole tenant.
"""

from __future__ import annotations

import uuid

from django.db.models import QuerySet

from loopmem.models import ApiKey
from loopmem.tenancy.audit import Actor
from loopmem.tenancy.principal import Principal
from loopmem.tenancy.scope import scope_for
from memory import selectors, services
from memory.filters import MemoryFilters
from memory.models import Memory


def oversees_tenant(principal: Principal) -> bool:
    """Whether the caller reaches every subject of the tenant it acts in (superadmin oversight)."""
    return principal.role == ApiKey.Role.SUPERADMIN


def memory_list_reached(
    *, principal: Principal, all_subjects: bool, include_superseded: bool, filters: MemoryFilters | None
) -> QuerySet[Memory]:
    """The caller's memories, newest first; with `all_subjects`, a superadmin's whole tenant.

    A non-superadmin's `all_subjects` is ignored: the list stays on its own subject.
    """
    if all_subjects and oversees_tenant(principal):
        tenant_id = principal.require_tenant().id
        return selectors.memory_list_all_subjects(
            tenant_id=tenant_id, include_superseded=include_superseded, filters=filters
        )
    return selectors.memory_list(scope=scope_for(principal), include_superseded=include_superseded, filters=filters)


def memory_rows_reached(*, principal: Principal) -> QuerySet[Memory]:
    """The rows the caller may address by id, scoped as list and forget: its own; a superadmin's whole tenant."""
    if oversees_tenant(principal):
        return selectors.memory_rows(tenant_id=principal.require_tenant().id)
    return selectors.memory_rows(scope=scope_for(principal))


def memory_get_reached(*, principal: Principal, memory_id: str) -> Memory:
    """One memory the caller reaches, live or superseded (superseded rows are kept for audit); else 404."""
    return selectors.memory_get(memory_rows_reached(principal=principal), memory_id)


def memory_history_reached(*, principal: Principal, memory_id: str) -> list[Memory]:
    """The supersede chain, oldest first, of a memory the caller reaches (memory.selectors.memory_history)."""
    return selectors.memory_history(memory_rows_reached(principal=principal), memory_id)


def memory_forget_reached(*, principal: Principal, memory_id: str, actor: Actor) -> uuid.UUID:
    """Delete a memory the caller reaches (audited as `actor`); another subject's, for a non-superadmin, is 404."""
    if oversees_tenant(principal):
        tenant_id = principal.require_tenant().id
        return services.memory_forget_any(tenant_id=tenant_id, memory_id=memory_id, actor=actor)
    return services.memory_forget(scope=scope_for(principal), memory_id=memory_id, actor=actor)
