"""Lenient request knobs, read the reference's way (limits, flags), shared by every read endpoint."""

from __future__ import annotations

import re

_LEADING_INT = re.compile(r"^\s*([+-]?\d+)")


def lenient_int(value: object, default: int) -> int:
    """An int, or the leading integer of a string ("12abc" → 12); anything else → `default`."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str) and (match := _LEADING_INT.match(value)):
        return int(match.group(1))
    return default


def clamp(value: int, low: int, high: int) -> int:
    return max(low, min(value, high))


def truthy(value: object) -> bool:
    """Only `true` and "true" turn a flag on."""
    return value is True or value == "true"
