"""Filters on a subject's long-term memories: one typed value and one way to narrow a scoped queryset.

Every read that takes filters (recall's exact and ANN paths, the ILIKE fallback, the list, and any later lane)
narrows the queryset that starts from `Memory.objects.for_scope(scope)` with `MemoryFilters.apply`, inside the
guarded read: a filtered read is as complete as an unfiltered one, never a post-filter over a pool. Each filter
is a conjunctive predicate, so the heavy-read guard still sees the (tenant, subject) pins, and the planner
still starts from the scope index (tags and metadata have GIN indexes to AND with it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, TypeVar

from django.db.models import QuerySet

from memory.models import Memory
from memory.time_lane import SharesDays

MAX_FILTER_TAGS = 50
MAX_FILTER_TAG_LENGTH = 200

Rows = TypeVar("Rows", bound=QuerySet[Memory])


@dataclass(frozen=True)
class MemoryFilters:
    """What a caller may narrow its memories by; the empty value narrows nothing.

    `tags`: every one must be on the row (`@>`); `tags_any`: at least one (`&&`); `metadata`: JSON containment
    (`@>`); `created_after` / `created_before`: strictly after / before `inserted_at`; `occurred_after` /
    `occurred_before`: an event day (`memory.time_lane`) strictly after / before the date (both: between them);
    `min_confidence`: ≥.
    """

    tags: tuple[str, ...] = ()
    tags_any: tuple[str, ...] = ()
    metadata: Mapping[str, Any] | None = field(default=None, hash=False)
    source: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    min_confidence: float | None = None
    occurred_after: date | None = None
    occurred_before: date | None = None

    @property
    def is_empty(self) -> bool:
        return not self.as_dict()

    def apply(self, rows: Rows) -> Rows:
        """`rows` (already scoped) narrowed by every filter that is set, ANDed."""
        if self.tags:
            rows = rows.filter(tags__contains=list(self.tags))
        if self.tags_any:
            rows = rows.filter(tags__overlap=list(self.tags_any))
        if self.metadata:
            rows = rows.filter(metadata__contains=dict(self.metadata))
        if self.source is not None:
            rows = rows.filter(source=self.source)
        if self.created_after is not None:
            rows = rows.filter(inserted_at__gt=self.created_after)
        if self.created_before is not None:
            rows = rows.filter(inserted_at__lt=self.created_before)
        if self.min_confidence is not None:
            rows = rows.filter(confidence__gte=self.min_confidence)
        if self.occurred_after is not None or self.occurred_before is not None:
            rows = rows.filter(SharesDays(self.occurred_after, self.occurred_before))
        return rows

    def as_dict(self) -> dict[str, Any]:
        """The filters that are set, in wire form (for a response's meta)."""
        wire: dict[str, Any] = {}
        if self.tags:
            wire["tags"] = list(self.tags)
        if self.tags_any:
            wire["tags_any"] = list(self.tags_any)
        if self.metadata:
            wire["metadata"] = dict(self.metadata)
        if self.source is not None:
            wire["source"] = self.source
        if self.created_after is not None:
            wire["created_after"] = self.created_after.isoformat()
        if self.created_before is not None:
            wire["created_before"] = self.created_before.isoformat()
        if self.min_confidence is not None:
            wire["min_confidence"] = self.min_confidence
        if self.occurred_after is not None:
            wire["occurred_after"] = self.occurred_after.isoformat()
        if self.occurred_before is not None:
            wire["occurred_before"] = self.occurred_before.isoformat()
        return wire


NO_FILTERS = MemoryFilters()


def narrow(rows: Rows, filters: MemoryFilters | None) -> Rows:
    """`rows` narrowed by `filters` (None narrows nothing)."""
    return rows if filters is None else filters.apply(rows)
