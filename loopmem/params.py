"""Lenient request knobs, read the reference's way (limits, flags), shared by every read endpoint."""

from __future__ import annotations

import re
import uuid

_LEADING_INT = re.compile(r"^\s*([+-]?\d+)")
_CANONICAL_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# Offsets past this are past the end of anything stored; larger ones would overflow the database's bigint.
MAX_OFFSET = 10**9


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


def canonical_uuid(value: object) -> uuid.UUID | None:
    """A canonical hyphenated UUID (any case; surrounding whitespace allowed), else None. Nothing else passes."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    return uuid.UUID(text) if _CANONICAL_UUID.fullmatch(text) else None
