"""limit/offset query parameters, read the same way by every list endpoint."""

from __future__ import annotations

from collections.abc import Mapping

from loopmem.errors import ValidationFailed

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


def page_params(
    params: Mapping[str, str], *, default: int = DEFAULT_LIMIT, maximum: int = MAX_LIMIT
) -> tuple[int, int]:
    """(limit, offset): limit clamped to [1, maximum]; a non-integer or negative offset is 422."""
    errors: dict[str, list[str]] = {}
    limit = _int_param(params, "limit", default, errors)
    offset = _int_param(params, "offset", 0, errors)
    if offset < 0:
        errors["offset"] = ["must be zero or more"]
    if errors:
        raise ValidationFailed(details=errors)
    return min(max(limit, 1), maximum), offset


def _int_param(params: Mapping[str, str], name: str, default: int, errors: dict[str, list[str]]) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        errors[name] = ["must be an integer"]
        return default
