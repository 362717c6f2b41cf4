"""`project_id` as the wire sends it (reference §2.0): blank means global; otherwise a canonical UUID."""

from __future__ import annotations

import re
import uuid

from loopmem.errors import InvalidProjectId

_CANONICAL_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def parse_project_id(value: object) -> uuid.UUID | None:
    """None, "" or whitespace → None (global); a canonical hyphenated UUID → it; anything else → 422."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidProjectId()
    if value.strip() == "":
        return None
    if not _CANONICAL_UUID.match(value):
        raise InvalidProjectId()
    return uuid.UUID(value)
