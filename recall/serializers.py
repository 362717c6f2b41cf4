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
from loopmem.http.inputs import LenientIntField, ProjectIdField, SessionIdField, WireField
from loopmem.params import NOT_BLANK_PATTERN, canonical_uuid
from memory.serializers import RECALL_MODE_SCHEMA, MemoryFiltersIn, recall_mode
from recall.services import DEFAULT_LIMIT, MAX_REFERENCED

MAX_QUERY_CHARS = 500


def _query(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidQuery("The `query` field must be a non-blank string.")
    query = value.strip()
    if len(query) > MAX_QUERY_CHARS:
        raise QueryTooLong()
    return query


def _recall_id(value: object) -> uuid.UUID:
    parsed = canonical_uuid(value)
    if parsed is None:
        raise InvalidRecallId()
    return parsed


def _article_ids(value: object) -> list[uuid.UUID]:
    """A non-empty list of at most MAX_REFERENCED canonical UUIDs."""
    if not isinstance(value, list) or not value:
        raise InvalidArticleIds()
    if len(value) > MAX_REFERENCED:
        raise TooManyArticleIds(details={"max": MAX_REFERENCED, "given": len(value)})
    ids = [canonical_uuid(item) for item in value]
    if any(i is None for i in ids):
        raise InvalidArticleIds()
    return [i for i in ids if i is not None]


class RecallContextIn(MemoryFiltersIn):
    """POST /api/v1/recall. Every input is checked before anything is embedded; the memory filters (validated
    into `filters`) narrow the memory half only."""

    project_id = ProjectIdField()
    query = WireField(
        _query,
        required=True,
        allow_null=False,
        schema={
            "type": "string",
            "pattern": NOT_BLANK_PATTERN,
            "maxLength": MAX_QUERY_CHARS,
            "description": "not blank (422 `invalid_query`); at most 500 characters once trimmed "
            "(422 `query_too_long`)",
        },
    )
    session_id = SessionIdField(missing=None, too_long=InvalidSessionId, strip=True)
    limit = LenientIntField(DEFAULT_LIMIT)
    mode = WireField(
        recall_mode, schema=RECALL_MODE_SCHEMA
    )  # how the memory half reads: semantic (default) | keyword | hybrid


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
