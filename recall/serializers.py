"""Merged recall's wire input: `/recall` (a read sent as POST) and `/recall/:id/referenced`."""

from __future__ import annotations

import uuid

from rest_framework import serializers

from loopmem.errors import (
    InvalidArticleIds,
    InvalidQuery,
    InvalidRecallId,
    InvalidSessionId,
    QueryTooLong,
    TooManyArticleIds,
)
from loopmem.http.inputs import LenientIntField, ProjectIdField, QueryField, SessionIdField, WireField
from loopmem.params import MAX_QUERY_CHARS, canonical_uuid_or
from memory.serializers import RECALL_MODE_SCHEMA, MemoryFiltersIn, recall_mode
from recall.services import DEFAULT_LIMIT, MAX_REFERENCED


def _blank_query() -> InvalidQuery:
    return InvalidQuery("The `query` field must be a non-blank string.")


def _recall_id(value: object) -> uuid.UUID:
    return canonical_uuid_or(value, InvalidRecallId)


def _article_ids(value: object) -> list[uuid.UUID]:
    """A non-empty list of at most MAX_REFERENCED canonical UUIDs."""
    if not isinstance(value, list) or not value:
        raise InvalidArticleIds()
    if len(value) > MAX_REFERENCED:
        raise TooManyArticleIds(details={"max": MAX_REFERENCED, "given": len(value)})
    return [canonical_uuid_or(item, InvalidArticleIds) for item in value]


class RecallContextIn(MemoryFiltersIn):
    """POST /api/v1/recall. Every input is checked before anything is embedded; the memory filters (validated
    into `filters`) narrow the memory half only."""

    project_id = ProjectIdField()
    query = QueryField(
        missing=_blank_query,
        too_long=QueryTooLong,
        description=f"not blank (422 `invalid_query`); at most {MAX_QUERY_CHARS} characters once trimmed "
        "(422 `query_too_long`)",
    )
    session_id = SessionIdField(missing=None, too_long=InvalidSessionId, strip=True)
    limit = LenientIntField(DEFAULT_LIMIT)
    mode = WireField(
        recall_mode, schema=RECALL_MODE_SCHEMA
    )  # how the memory half reads: semantic (default) | keyword | hybrid | deep


class ReferencedIn(serializers.Serializer):  # type: ignore[type-arg]
    """POST /api/v1/recall/:recall_id/referenced (the path's id joins the body)."""

    project_id = ProjectIdField()
    recall_id = WireField(_recall_id, schema={"type": "string", "format": "uuid"})
    article_ids = WireField(
        _article_ids,
        required=True,
        allow_null=False,
        schema={
            "type": "array",
            "items": {"type": "string", "format": "uuid"},
            "minItems": 1,
            "maxItems": MAX_REFERENCED,
            "description": "articles this recall surfaced (422 `not_surfaced` otherwise)",
        },
    )
