"""`meta.outcome` of every read envelope (reference §2.0): success | empty | degraded | fallback | error."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Knowledge failure tags that mean the search could not run at all (merged recall uses the same list).
UNRUNNABLE_KNOWLEDGE = frozenset({"empty_query", "invalid_weights", "bad_request", "request_error"})
_REASON_KEYS = ("reason", "degraded_reason", "fallback_reason", "semantic_unavailable_reason")


def outcome_for(meta: Mapping[str, Any], *, count: int, offset: int = 0) -> str:
    """The first matching rule wins."""
    reasons = {meta.get(key) for key in _REASON_KEYS} - {None}
    if (
        meta.get("fallback_reason") in UNRUNNABLE_KNOWLEDGE
        or meta.get("degraded_reason") in UNRUNNABLE_KNOWLEDGE
        or "embedding_dimension_mismatch" in {meta.get("reason"), meta.get("degraded_reason")}
    ):
        return "error" if count == 0 else "degraded"
    if "heavy_read_overloaded" in reasons and meta.get("search_mode") != "keyword_only":
        return "degraded"
    if meta.get("fallback") is True or meta.get("degraded") is True or meta.get("semantic_unavailable_reason"):
        return "fallback"
    if (
        meta.get("semantic_under_filled")
        or meta.get("ann_iterative_scan") == "unavailable"
        or meta.get("keyword_unavailable_reason")
    ):
        return "degraded"
    past_the_end = offset > 0 and meta.get("total_count") not in (0, None)
    if count == 0 and not past_the_end:
        return "empty"
    return "success"
