"""limit/offset query parameters, read the same way by every list endpoint."""

from __future__ import annotations

from collections.abc import Mapping

from loopmem.params import MAX_OFFSET, clamp, lenient_int

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


def page_params(
    params: Mapping[str, str], *, default: int = DEFAULT_LIMIT, maximum: int = MAX_LIMIT
) -> tuple[int, int]:
    """(limit, offset) as the reference reads them: lenient integers, limit clamped to [1, maximum], offset ≥ 0."""
    limit = clamp(lenient_int(params.get("limit"), default), 1, maximum)
    offset = clamp(lenient_int(params.get("offset"), 0), 0, MAX_OFFSET)
    return limit, offset
