"""The time lane of hybrid recall, and the event-time filters: the days a memory is about, against the days asked.

A memory's event days are the spans its text names, resolved when it was written (`Memory.occurred_on`,
`memory.event_time`); a memory that names none happened the day it was written. A query that names days ("on
2026-03-16", "in September 2025", "last week": resolved against today) asks for memories of those days, and each
candidate's *closeness* is the best Jaccard of one of its spans with one asked span: 1 for the same day or month,
small for one day inside a month, 0 when they share no day. `occurred_after` / `occurred_before` keep the memories
with an event day after / before a date.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import date
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import BooleanField, F, FloatField, Func
from django.db.models.sql.compiler import SQLCompiler
from django.utils import timezone
from psycopg.types.multirange import Multirange
from psycopg.types.range import Range

from memory.event_time import DaySpan, event_spans

# A memory that names no day: the day it was written (UTC), as a one-day multirange.
_EVENT_DAYS_SQL = (
    "coalesce({occurred}, datemultirange(daterange(({inserted} AT TIME ZONE 'UTC')::date, "
    "({inserted} AT TIME ZONE 'UTC')::date + 1)))"
)
# The best Jaccard of a pair (event span, asked span) that shares a day; 0 when none does.
_CLOSENESS_SQL = (
    "(SELECT coalesce(max((upper(r * q) - lower(r * q))::float8 "
    "/ ((upper(r) - lower(r)) + (upper(q) - lower(q)) - (upper(r * q) - lower(r * q)))), 0.0) "
    "FROM unnest({days}) AS r, unnest(%s::datemultirange) AS q WHERE r && q)"
)


def asked_spans(query: str) -> list[DaySpan]:
    """The days a query names, resolved against today (UTC)."""
    return event_spans(query, timezone.now().date())


def closeness(asked: Sequence[DaySpan], days: Sequence[DaySpan]) -> float:
    """`Closeness` in Python, for rows already read."""
    return max((mine.closeness(wanted) for mine in days for wanted in asked), default=0.0)


def multirange(spans: Sequence[DaySpan]) -> Multirange[date]:
    return Multirange([Range(span.start, span.end, "[)") for span in spans])


class _OnEventDays(Func, abc.ABC):
    """An expression over the row's event days (one SQL fragment: the guard and the ORM walk expression trees)."""

    def __init__(self) -> None:
        super().__init__(F("occurred_on"), F("inserted_at"))

    def as_sql(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, *args: Any, **kwargs: Any
    ) -> tuple[str, list[Any]]:
        (occurred, occurred_params), (inserted, inserted_params) = (
            compiler.compile(expression) for expression in self.get_source_expressions()
        )
        days = _EVENT_DAYS_SQL.format(occurred=occurred, inserted=inserted)
        return self.render(days, [*occurred_params, *inserted_params, *inserted_params])

    @abc.abstractmethod
    def render(self, days: str, params: list[Any]) -> tuple[str, list[Any]]:
        """The fragment over `days` (the row's event days as a datemultirange, with its parameters)."""


class _AgainstAsked(_OnEventDays, abc.ABC):
    def __init__(self, asked: Sequence[DaySpan]) -> None:
        super().__init__()
        self.asked = tuple(asked)


class Closeness(_AgainstAsked):
    """How close the row's event days come to the asked spans (`closeness`), in [0, 1]."""

    output_field = FloatField()

    def render(self, days: str, params: list[Any]) -> tuple[str, list[Any]]:
        return _CLOSENESS_SQL.format(days=days), [*params, multirange(self.asked)]


class TouchesDays(_AgainstAsked):
    """The row shares a day with the asked spans (a cheap overlap test, so that `Closeness` runs on those rows only)."""

    output_field = BooleanField()

    def render(self, days: str, params: list[Any]) -> tuple[str, list[Any]]:
        return f"({days} && %s::datemultirange)", [*params, multirange(self.asked)]


class SharesDays(_OnEventDays):
    """The row has an event day strictly after `after` and strictly before `before` (None: open): a filter."""

    output_field = BooleanField()

    def __init__(self, after: date | None, before: date | None) -> None:
        super().__init__()
        self.after, self.before = after, before

    def render(self, days: str, params: list[Any]) -> tuple[str, list[Any]]:
        return f"({days} && daterange(%s::date, %s::date, '()'))", [*params, self.after, self.before]
