"""An import body (POST /api/v1/memory/import, `memory_import`): NDJSON or a JSON array of export lines, read into
validated rows, or refused whole.

Each item is an `ImportLineIn`; any bad item is 422 for the whole body (nothing is written), naming up to 20 items
(`line N`, 1-based: a line of NDJSON, an item of an array) and their fields. The edge's JSON rules (NUL, lone
surrogates, numbers jsonb cannot hold, depth) hold for every item too.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from loopmem.errors import ValidationFailed
from loopmem.http.edge import loads_json
from memory.importing import ImportRow
from memory.serializers import ImportLineIn

MAX_IMPORT_BYTES = 10 * 1024 * 1024
MAX_IMPORT_ERRORS = 20


def import_rows(raw: bytes) -> list[ImportRow]:
    """The body's rows, in order; a 422 naming the bad items (at most 20) if there is any."""
    rows: list[ImportRow] = []
    errors: dict[str, Any] = {}
    origins: set[uuid.UUID] = set()
    for number, item in _items(_text(raw)):
        row, problem = _row(number, item)
        if row is not None and row.origin_id is not None:
            if row.origin_id in origins:
                problem = {"id": ["appears on an earlier line"]}
            origins.add(row.origin_id)
        if problem is not None:
            errors[f"line {number}"] = problem
            if len(errors) >= MAX_IMPORT_ERRORS:
                break
        elif row is not None:
            rows.append(row)
    if errors:
        raise ValidationFailed(details=errors)
    return rows


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValidationFailed(details={"body": ["must be UTF-8 text"]}) from None


def _items(text: str) -> list[tuple[int, Any]]:
    """(number, parsed JSON) of each item: an array's items, or NDJSON's non-blank lines (the first malformed
    line is 422 at once)."""
    if text.lstrip().startswith("["):
        try:
            return list(enumerate(loads_json(text), start=1))
        except ValueError as exc:
            raise ValidationFailed(details={"body": [f"not a JSON array: {exc}"]}) from None
    items: list[tuple[int, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                items.append((number, loads_json(line, where=f"line {number}")))
            except ValueError:
                raise ValidationFailed(details={f"line {number}": ["not valid JSON"]}) from None
    return items


def _row(number: int, item: Any) -> tuple[ImportRow | None, Any]:
    """The item's row, or what is wrong with it (its fields' messages as plain strings)."""
    if not isinstance(item, dict):
        return None, ["must be a JSON object"]
    parsed = ImportLineIn(data=item)
    if not parsed.is_valid():
        return None, json.loads(json.dumps(parsed.errors))  # ErrorDetail → plain strings
    return parsed.row(number), None
