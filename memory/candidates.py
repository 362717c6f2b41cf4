"""The one scoped candidate set every recall lane reads: semantic, keyword, and the substring fallback.

Isolation is the (tenant, subject) scoping verb; the project partition and the superseded rule narrow inside it.
A lane adds only its own predicate (the semantic lane: embedded with the query's model; the keyword lane: a term
match), so a filter added here applies to every lane at once, inside the scoped read, never after it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

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


@dataclass(frozen=True)
class CandidateSet:
    """One recall's candidates: what chooses them, and their queryset, built on first use. A typical recall (no
    filter) runs reads prepared once per shape (`loopmem.reads.prepared`) from `scope` and `include_superseded`, and
    never builds the queryset, which cost about as much as running such a read."""

    scope: Scope
    include_superseded: bool
    filters: MemoryFilters | None = None

    @functools.cached_property
    def rows(self) -> MemoryQuerySet:
        return recall_candidates(self.scope, include_superseded=self.include_superseded, filters=self.filters)

    @property
    def unfiltered(self) -> bool:
        """No filter narrows them: a prepared read's shape holds them whole."""
        return self.filters is None or self.filters.is_empty
