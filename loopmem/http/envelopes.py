"""The shapes every app's envelopes share: a page of a list, and `meta.outcome` on every read."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypedDict

from loopmem.http.outcome import outcome_for
from loopmem.secret_guard.policy import SecretReport


class PageMeta(TypedDict, total=False):
    total_count: int
    limit: int
    offset: int
    outcome: str


class Page(TypedDict):
    data: list[Any]
    meta: PageMeta


def paginated(rows: Iterable[Any], *, total_count: int, limit: int, offset: int, outcome: bool = True) -> Page:
    """{data, meta: {total_count, limit, offset[, outcome]}}; projects (not a memory read) carry no outcome."""
    data = list(rows)  # serialized rows (DRF's ReturnList)
    meta: PageMeta = {"total_count": total_count, "limit": limit, "offset": offset}
    if outcome:
        meta["outcome"] = outcome_for(meta, count=len(data), offset=offset)
    return {"data": data, "meta": meta}


def with_redactions(body: dict[str, Any], report: SecretReport) -> dict[str, Any]:
    """The body, plus `meta.redacted` (`{kinds, spans}`) when the secret policy redacted the write.

    Additive (DESIGN §11): a write with nothing redacted answers with no `meta` key at all.
    """
    if report:
        body.setdefault("meta", {})["redacted"] = report.details()
    return body
