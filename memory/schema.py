"""OpenAPI for /api/v1/memory: each operation's request, its success envelope and every error it can give."""

from __future__ import annotations

from typing import Any, cast

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import serializers

from knowledge.schema import PROPOSAL_ANSWERS
from loopmem.errors import (
    AlreadyGraduated,
    AlreadySuperseded,
    DuplicateTitle,
    GateUnavailable,
    HeavyReadOverloaded,
    IdempotencyKeyReused,
    InvalidIdempotencyKey,
    InvalidMemoryId,
    InvalidProjectId,
    InvalidQuery,
    InvalidReScope,
    InvalidSessionId,
    MemoryQuarantined,
    MissingSessionId,
    NotFound,
    PromotionBudgetExceeded,
    QuotaExceeded,
    SecretDetected,
    ValidationFailed,
)
from loopmem.http import idempotency
from loopmem.http.inputs import DATETIME_OR_DATE_SCHEMA, ProjectIdField, TagsField, TextField, session_id_schema
from loopmem.http.openapi import (
    BODY,
    BODY_REQUIRED,
    FLAG_PARAMETER,
    JSON_QUERY,
    JSON_TEXT,
    OUTCOME,
    PAGE_PARAMETERS,
    ROW_ID,
    data_envelope,
    json_query_parameter,
    page,
    responses,
)
from loopmem.params import NOT_BLANK_PATTERN
from memory.envelopes import EXPORT_CONTENT_TYPE
from memory.filters import MAX_FILTER_TAG_LENGTH, MAX_FILTER_TAGS
from memory.models import MAX_TEXT_BYTES, Memory
from memory.serializers import (
    MAX_BATCH,
    BatchIn,
    GraduateIn,
    ImportLineIn,
    MemoryOut,
    PromoteIn,
    PromotionJobOut,
    RecallIn,
    RememberIn,
    SessionTurnIn,
    SessionTurnOut,
)

# A memory's text and a turn's content (validate_text_bytes): not blank, whitespace alone included, and no NUL.
MEMORY_TEXT: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "pattern": NOT_BLANK_PATTERN,
    "description": f"not blank (whitespace alone is blank), at most {MAX_TEXT_BYTES:,} bytes of UTF-8",
}


@extend_schema_field(MEMORY_TEXT)
class MemoryTextField(TextField):
    """Documentation only: memory text and turn content as the service accepts them."""


class LongTermBodyIn(RememberIn):
    """POST /api/v1/memory, long-term tier (the default), as the schema shows it."""

    project_id = ProjectIdField()
    text = MemoryTextField()
    tier = serializers.ChoiceField(choices=["long_term", ""], required=False, allow_null=True)


class SessionTurnBodyIn(SessionTurnIn):
    """POST /api/v1/memory with tier "session", as the schema shows it."""

    project_id = ProjectIdField()
    tier = serializers.ChoiceField(choices=["session"])
    content = MemoryTextField()


class ImportLineBodyIn(ImportLineIn):
    """One line of POST /api/v1/memory/import, as the schema shows it."""

    text = MemoryTextField()


@extend_schema_field(
    {
        "anyOf": [
            {"type": "object", "additionalProperties": {}},
            {"type": "array", "items": {}},
            {"type": "string"},
            {"type": "number"},
            {"type": "boolean"},
        ],
        "description": "a remember body (either tier); any other item but null fails alone, as its own 422",
    }
)
class BatchItemField(serializers.JSONField):
    """An item of a batch as the schema shows it: any JSON but null (a null item refuses the whole batch)."""


class BatchBodyIn(BatchIn):
    """POST /api/v1/memory/batch: each item is a remember body (either tier), validated on its own."""

    memories = serializers.ListField(child=BatchItemField(), min_length=1, max_length=MAX_BATCH)


_TAGS = TagsField()
_TAG = cast(TextField, _TAGS.child)
# A correction names at least one field and no other (MemoryPatchIn.to_internal_value), each under remember's rules.
PATCH_IN = {
    "type": "object",
    "properties": {
        "text": MEMORY_TEXT,
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "tags": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": _TAG.max_length},
            "maxItems": _TAGS.max_length,
            "nullable": True,
        },
        "metadata": {"type": "object", "additionalProperties": {}, "nullable": True},
    },
    "minProperties": 1,
    "additionalProperties": False,
}

REMEMBER_IN = PolymorphicProxySerializer(
    component_name="RememberIn",
    serializers=[LongTermBodyIn, SessionTurnBodyIn],
    resource_type_field_name=None,
)


def remembered_out(**kwargs: Any) -> PolymorphicProxySerializer:
    """What a remember wrote: a long-term memory or a session turn."""
    return PolymorphicProxySerializer(
        component_name="RememberedOut",
        serializers=[MemoryOut, SessionTurnOut],
        resource_type_field_name=None,
        **kwargs,
    )


# A remember body's own errors (either tier), on POST /memory and on each item of a batch.
REMEMBER_ERRORS = (ValidationFailed, InvalidProjectId, QuotaExceeded, SecretDetected)

# The session-id rule (not blank, at most 200 bytes) on the `{session_id}` of the history and the promotion status.
SESSION_ID_IN_PATH = OpenApiParameter(
    "session_id", session_id_schema(required=True), location=OpenApiParameter.PATH, description="the session's id"
)
IDEMPOTENCY_KEY = OpenApiParameter(
    idempotency.HEADER,
    {"type": "string", "pattern": f"^{idempotency.KEY_PATTERN}$"},
    location=OpenApiParameter.HEADER,
    description="optional; 1-255 printable ASCII characters. A retry with the same key and body within the retention "
    "window (24 h) replays the first answer (header `Idempotent-Replayed: true`); the same key with another body "
    "is 422 `idempotency_key_reused`. Scoped to the caller's tenant and subject.",
)
IDEMPOTENCY_ERRORS = (InvalidIdempotencyKey, IdempotencyKeyReused)

# Each value is one tag or several, comma-separated (empty parts dropped), each at most 200 characters; at most
# 50 tags in all once split (a bound per value and on the count of values is what a schema can say).
_FILTER_TAGS = {
    "type": "array",
    "items": {
        "type": "string",
        "pattern": rf"^[^,\u0000]{{0,{MAX_FILTER_TAG_LENGTH}}}(,[^,\u0000]{{0,{MAX_FILTER_TAG_LENGTH}}})*$",
    },
    "maxItems": MAX_FILTER_TAGS,
}
FILTER_PARAMETERS = [
    OpenApiParameter("tags", _FILTER_TAGS, description="every tag must be on the memory (repeat or comma-separate)"),
    OpenApiParameter("tags_any", _FILTER_TAGS, description="at least one of these tags (repeat or comma-separate)"),
    json_query_parameter(
        "metadata",
        {"type": "object", "additionalProperties": {}},
        description='JSON object the metadata must contain (`@>`), e.g. {"lang":"py"}; blank is no filter; '
        "any other JSON (or text that is not JSON) is 422",
    ),
    OpenApiParameter("created_after", DATETIME_OR_DATE_SCHEMA, description="ISO 8601 datetime or date; strictly after"),
    OpenApiParameter("created_before", DATETIME_OR_DATE_SCHEMA, description="ISO 8601 datetime or date; before"),
    OpenApiParameter(
        "occurred_after",
        DATETIME_OR_DATE_SCHEMA,
        description="ISO 8601 date (a datetime counts by its UTC day): an event day of the memory is after it",
    ),
    OpenApiParameter(
        "occurred_before",
        DATETIME_OR_DATE_SCHEMA,
        description="ISO 8601 date (a datetime counts by its UTC day): an event day of the memory is before it",
    ),
    OpenApiParameter(
        "min_confidence",
        {"anyOf": [{"type": "number", "minimum": 0, "maximum": 1}, {"type": "string", "enum": [""]}]},
        description="0..1; confidence at least this; blank is no filter",
    ),
]


def lane_scores(**kwargs: Any) -> serializers.Serializer:  # type: ignore[type-arg]
    return inline_serializer(
        "LaneScores",
        {
            "semantic": serializers.FloatField(allow_null=True),
            "keyword": serializers.FloatField(allow_null=True),
            "time": serializers.FloatField(
                required=False,
                help_text="hybrid and deep, when the query names days: closeness of the memory's event days",
            ),
            "hop": serializers.FloatField(
                required=False, help_text="deep: the memory's share of the terms of the best hits (0: not linked)"
            ),
        },
        **kwargs,
    )


RECALL_META = inline_serializer(
    "MemoryRecallMeta",
    {
        "total_count": serializers.IntegerField(),
        "fallback": serializers.BooleanField(),
        "reason": serializers.CharField(allow_null=True, help_text="why the fallback ran, or null"),
        "underfilled": serializers.BooleanField(),
        "recall_path": serializers.ChoiceField(choices=["exact", "ann"], required=False),
        "ann_iterative_scan": serializers.CharField(required=False, help_text="only when the ANN index ran"),
        "ann_iterative_scan_reason": serializers.CharField(required=False),
        "mode": serializers.ChoiceField(
            choices=["keyword", "hybrid", "deep"], required=False, help_text="keyword, hybrid, deep"
        ),
        "lane_counts": serializers.DictField(
            child=serializers.IntegerField(),
            required=False,
            help_text="rows each lane brought: semantic, keyword, time (a query that names days), hop (deep)",
        ),
        "answer_confidence": serializers.CharField(required=False, allow_null=True),
        "lane_lost": serializers.CharField(required=False),
        "asked_days": inline_serializer(
            "AskedDays",
            {"start": serializers.DateField(), "end": serializers.DateField(help_text="exclusive")},
            many=True,
            required=False,
            help_text="hybrid and deep: the days the query names, resolved against today (UTC)",
        ),
        "outcome": OUTCOME,
    },
)
RECALL_OUT = inline_serializer(
    "MemoryRecallOut",
    {
        "data": inline_serializer(
            "MemoryRecallHit",
            {
                "memory": MemoryOut(),
                "score": serializers.FloatField(allow_null=True),
                "scores": lane_scores(required=False, help_text="keyword, hybrid and deep modes only"),
            },
            many=True,
        ),
        "meta": RECALL_META,
    },
)

BATCH_OUT = inline_serializer(
    "MemoryBatchOut",
    {
        "data": inline_serializer(
            "MemoryBatchItem",
            {
                "index": serializers.IntegerField(),
                "status": serializers.IntegerField(help_text="201, or the item's error status (422, 429, …)"),
                "memory": remembered_out(required=False),
                "error": serializers.DictField(required=False, help_text="{status, code, message, details}"),
                "meta": serializers.DictField(required=False, help_text="{redacted}, as on a single write"),
            },
            many=True,
        ),
        "meta": inline_serializer(
            "MemoryBatchMeta", {"created": serializers.IntegerField(), "failed": serializers.IntegerField()}
        ),
    },
)
IMPORT_OUT = data_envelope(
    "MemoryImportOut",
    inline_serializer(
        "MemoryImportReport",
        {
            "lines": serializers.IntegerField(),
            "created": serializers.IntegerField(),
            "skipped": serializers.IntegerField(help_text="already held by the subject (same chain key)"),
            "linked": serializers.IntegerField(help_text="supersede links written"),
        },
    ),
)
FORGOTTEN_OUT = data_envelope(
    "MemoryForgottenOut",
    inline_serializer(
        "MemoryForgotten",
        {"id": serializers.UUIDField(), "deleted": serializers.BooleanField()},
    ),
)
PROMOTE_OUT = data_envelope(
    "PromotionEnqueuedOut",
    inline_serializer(
        "PromotionEnqueued",
        {"session_id": serializers.CharField(), "status": serializers.ChoiceField(choices=["enqueued"])},
    ),
)

memory_schema = extend_schema_view(
    create=extend_schema(
        request=REMEMBER_IN,
        extensions=BODY_REQUIRED,
        parameters=[IDEMPOTENCY_KEY],
        responses=responses(
            {201: data_envelope("RememberOut", remembered_out(), write=True)},
            *REMEMBER_ERRORS,
            *IDEMPOTENCY_ERRORS,
            body=True,
            write=True,
        ),
    ),
    list=extend_schema(
        parameters=[
            *PAGE_PARAMETERS,
            OpenApiParameter("include_superseded", str, description=FLAG_PARAMETER),
            OpenApiParameter(
                "source",
                str,
                description=f"{', '.join(Memory.Source.values)}; any other value applies no filter (reference §2.3)",
            ),
            OpenApiParameter(
                "all_subjects", str, description=f"superadmin oversight: every subject of the tenant. {FLAG_PARAMETER}"
            ),
            *FILTER_PARAMETERS,
        ],
        responses=responses({200: page("MemoryPage", MemoryOut())}, *JSON_QUERY),
    ),
    retrieve=extend_schema(
        parameters=[ROW_ID], responses=responses({200: data_envelope("MemoryGetOut", MemoryOut())}, NotFound)
    ),
    partial_update=extend_schema(
        request={"application/json": PATCH_IN},
        extensions=BODY_REQUIRED,
        parameters=[ROW_ID],
        responses=responses(
            {200: data_envelope("MemoryCorrectOut", MemoryOut(), write=True)},
            NotFound,
            AlreadySuperseded,
            ValidationFailed,
            SecretDetected,
            QuotaExceeded,
            body=True,
            write=True,
        ),
    ),
    destroy=extend_schema(parameters=[ROW_ID], responses=responses({200: FORGOTTEN_OUT}, NotFound, write=True)),
    history=extend_schema(
        parameters=[ROW_ID],
        responses=responses({200: data_envelope("MemoryHistoryOut", MemoryOut(many=True))}, NotFound),
    ),
    session=extend_schema(
        parameters=[SESSION_ID_IN_PATH, *PAGE_PARAMETERS],
        # A session id holding a newline matches no route: 404.
        responses=responses({200: page("SessionTurnPage", SessionTurnOut())}, ValidationFailed, NotFound),
    ),
    promote=extend_schema(
        request=PromoteIn,
        responses=responses(
            {202: PROMOTE_OUT},
            MissingSessionId,
            InvalidSessionId,
            PromotionBudgetExceeded,
            body=True,
            write=True,
        ),
    ),
    promotion=extend_schema(
        parameters=[SESSION_ID_IN_PATH],
        responses=responses(
            {200: data_envelope("PromotionJobGetOut", PromotionJobOut())}, NotFound, MissingSessionId, InvalidSessionId
        ),
    ),
    # A read sent as POST: exempt from the custody halt.
    recall=extend_schema(
        request=RecallIn,
        responses=responses(
            {200: RECALL_OUT}, InvalidProjectId, InvalidQuery, ValidationFailed, HeavyReadOverloaded, body=True
        ),
    ),
    graduate=extend_schema(
        request=GraduateIn,
        responses=responses(
            PROPOSAL_ANSWERS,
            InvalidMemoryId,
            InvalidReScope,
            NotFound,
            AlreadyGraduated,
            DuplicateTitle,
            GateUnavailable,
            SecretDetected,
            MemoryQuarantined,
            body=True,
            write=True,
        ),
    ),
    batch=extend_schema(
        request=BatchBodyIn,
        parameters=[IDEMPOTENCY_KEY],
        responses=responses(
            {
                200: OpenApiResponse(
                    BATCH_OUT, description="per item: 201 with `memory`, or its error status with `error`, in order"
                )
            },
            *IDEMPOTENCY_ERRORS,
            body=True,
            write=True,
        ),
    ),
    export=extend_schema(
        parameters=[
            OpenApiParameter("include_superseded", str, description=f"also the superseded versions. {FLAG_PARAMETER}")
        ],
        responses=responses(
            {
                (200, EXPORT_CONTENT_TYPE): OpenApiResponse(
                    OpenApiTypes.STR,
                    description="NDJSON: one memory object per line, oldest first, plus `supersedes`; no embedding",
                )
            }
        ),
    ),
    import_memories=extend_schema(
        request={
            EXPORT_CONTENT_TYPE: OpenApiTypes.STR,
            "application/json": ImportLineBodyIn(many=True),
        },
        responses=responses(
            {200: IMPORT_OUT},
            # The body is read raw (NDJSON or a JSON array), not through the JSON parser: no 415.
            *BODY,
            *JSON_TEXT,
            ValidationFailed,
            QuotaExceeded,
            SecretDetected,
            write=True,
        ),
    ),
)
