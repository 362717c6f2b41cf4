"""POST /memory/recall as one use case: the subject's memories read in the asked mode, and the read counted.

The read is `memory.recall_modes`; the count is the recall bump towards graduation (`memory_note_recalled`), which
never fails or slows the recall it counts. Merged recall counts its memory half the same way, in its own service.
"""

from __future__ import annotations

from loopmem.models import Tenant
from loopmem.tenancy.scope import Scope
from memory.filters import MemoryFilters
from memory.recall_bump import memory_note_recalled
from memory.recall_modes import DEFAULT_MODE, RecallMode, memory_recall_in_mode
from memory.selectors import RecallResult


def memory_recall_counted(
    *,
    scope: Scope,
    tenant: Tenant,
    query: str,
    limit: int | None = None,
    include_superseded: bool = False,
    mode: RecallMode = DEFAULT_MODE,
    filters: MemoryFilters | None = None,
) -> RecallResult:
    """Recall the subject's memories for `query` the way `mode` says, inside the filters, and count the hits."""
    result = memory_recall_in_mode(
        scope=scope,
        tenant=tenant,
        query=query,
        limit=limit,
        include_superseded=include_superseded,
        mode=mode,
        filters=filters,
    )
    memory_note_recalled(tenant_id=scope.tenant_id, result=result, include_superseded=include_superseded)
    return result
