"""The one scoped candidate set every recall lane reads: semantic, keyword, and the substring fallback.

Isolation is the (tenant, subject) scoping verb; the project partition and the superseded rule narrow inside it.
A lane adds only its own predicate (the semantic lane: embedded with the query's model; the keyword lane: a term
match), so a filter added here applies to every lane at once, inside the scoped read, never after it.
"""

from __future__ import annotations

from loopmem.tenancy.scope import Scope
from memory.filters import MemoryFilters, narrow
from memory.models import Memory, MemoryQuerySet

# Never loaded by a recall: the vectors (and a reembed's pending one) and the search vector are read inside SQL only.
HEAVY_COLUMNS = ("embedding", "pending_embedding", "search_vector")


def recall_candidates(
    scope: Scope, *, include_superseded: bool, filters: MemoryFilters | None = None
) -> MemoryQuerySet:
    """The memories a recall in `scope` may return: the subject's, in the partition, live unless asked, matching
    the caller's filters."""
    rows = narrow(Memory.objects.for_scope(scope), filters)
    if not include_superseded:
        rows = rows.live()
    return rows.in_partition(scope.project_id).defer(*HEAVY_COLUMNS)
