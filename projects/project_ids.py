"""`project_id` as the wire sends it (reference §2.0): blank means global; otherwise a canonical UUID."""

from __future__ import annotations

import uuid

from loopmem.errors import InvalidProjectId
from loopmem.params import canonical_uuid


def parse_project_id(value: object) -> uuid.UUID | None:
    """None, "" or whitespace → None (global); a canonical hyphenated UUID → it; anything else → 422."""
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return None
    parsed = canonical_uuid(value)
    if parsed is None or (isinstance(value, str) and value != value.strip()):
        raise InvalidProjectId()
    return parsed
