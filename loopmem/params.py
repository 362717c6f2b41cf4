"""The wire's rules, once each and free of DRF (services and selectors may use them too): the canonical UUID,
`project_id`, the session-id rule, the search-query rule, and lenient limits, offsets and flags read the
reference's way."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from typing import Literal

from loopmem.errors import InvalidProjectId, NotFound

# Offsets past this are past the end of anything stored; larger ones would overflow the database's bigint.
MAX_OFFSET = 10**9
# A session id is opaque to the service: at most this many bytes of UTF-8, refused (never truncated) beyond.
MAX_SESSION_ID_BYTES = 200
# A search query (merged recall, knowledge search) is at most this many characters once trimmed.
MAX_QUERY_CHARS = 500
DEFAULT_PAGE_LIMIT = 50
MAX_PAGE_LIMIT = 200

_LEADING_INT = re.compile(r"^\s*([+-]?\d+)")
# Patterns that JSON Schema's ECMA-262 regexes, Python's `re` and the Rust engine schemathesis validates with read
# alike. Text anywhere in a request holds no NUL (loopmem.http.edge: 400 `invalid_text`). Lone UTF-16 surrogates are
# refused too, but no pattern says so: Rust's engine cannot name a surrogate, and without ECMA-262's `u` flag a
# class that excludes them would exclude every character outside the BMP as well.
TEXT_PATTERN = r"^[^\u0000]*$"
# Python's whitespace (`str.strip()`), one by one: ECMA-262's `\s` and Python's differ (\x1c-\x1f and \x85 are space
# to Python only, \ufeff to ECMA-262 only).
_BLANK = r"\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# "Not blank" as the service means it (`str.strip()` leaves something), and no NUL. Leading blanks, the first other
# character, then the rest: one way to match, so a backtracking engine stays linear on long text.
NOT_BLANK_PATTERN = rf"^[{_BLANK}]*[^\u0000{_BLANK}][^\u0000]*$"


def trimmed_text_pattern(max_chars: int, *, blank: bool = False) -> str:
    """Text whose `strip()` is at most `max_chars` characters (and not blank, unless `blank`), without NUL: the
    rule of a field the service trims before it counts, which `maxLength` (it counts the whitespace) cannot state.
    Each alternative has one way to match, so a backtracking engine stays linear."""
    trimmed = rf"[^\u0000{_BLANK}](?:[^\u0000]{{0,{max_chars - 2}}}[^\u0000{_BLANK}])?"
    if blank:
        return rf"^(?:[{_BLANK}]*|[{_BLANK}]*{trimmed}[{_BLANK}]*)$"
    return rf"^[{_BLANK}]*{trimmed}[{_BLANK}]*$"


# The regex source is also the OpenAPI `pattern` of every id (loopmem.http.openapi), so the schema says what passes.
CANONICAL_UUID_PATTERN = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_CANONICAL_UUID = re.compile(CANONICAL_UUID_PATTERN)


def canonical_uuid(value: object) -> uuid.UUID | None:
    """A canonical hyphenated UUID (any case; surrounding whitespace allowed), else None. Nothing else passes."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    return uuid.UUID(text) if _CANONICAL_UUID.fullmatch(text) else None


def canonical_uuid_or(value: object, error: Callable[[], Exception]) -> uuid.UUID:
    """`canonical_uuid`, where anything else is the caller's own error (each id has its own code)."""
    parsed = canonical_uuid(value)
    if parsed is None:
        raise error()
    return parsed


def project_id_from(value: object) -> uuid.UUID | None:
    """None, "" or whitespace → None (global); a canonical hyphenated UUID → it; anything else → 422."""
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return None
    parsed = canonical_uuid(value)
    if parsed is None or (isinstance(value, str) and value != value.strip()):
        raise InvalidProjectId()
    return parsed


def path_id(value: object) -> uuid.UUID:
    """A row id from a URL path: a canonical UUID, else 404 like any id that is not there (no existence oracle)."""
    return canonical_uuid_or(value, NotFound)


def session_id_problem(value: object) -> str | None:
    """The one session-id rule: opaque text, not blank, at most 200 bytes. "missing" | "too_long" | None."""
    if not isinstance(value, str) or not value.strip():
        return "missing"
    if len(value.encode()) > MAX_SESSION_ID_BYTES:
        return "too_long"
    return None


def query_problem(value: object) -> Literal["missing", "too_long"] | None:
    """The one search-query rule: text, not blank, at most 500 characters once trimmed (the query is trimmed)."""
    if not isinstance(value, str) or not value.strip():
        return "missing"
    if len(value.strip()) > MAX_QUERY_CHARS:
        return "too_long"
    return None


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


def page_params(
    params: Mapping[str, str], *, default: int = DEFAULT_PAGE_LIMIT, maximum: int = MAX_PAGE_LIMIT
) -> tuple[int, int]:
    """(limit, offset) as the reference reads them: lenient integers, limit clamped to [1, maximum], offset ≥ 0."""
    limit = clamp(lenient_int(params.get("limit"), default), 1, maximum)
    offset = clamp(lenient_int(params.get("offset"), 0), 0, MAX_OFFSET)
    return limit, offset
