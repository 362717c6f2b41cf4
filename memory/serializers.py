"""Memory wire shapes (reference §2.1): input for every memory endpoint, output for every read.

The generic fields (text, numbers, times, JSON objects, tags, ids) are the input layer's (`loopmem.http.inputs`);
an import body is read by `memory.import_body`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any, ClassVar

from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from loopmem.errors import (
    InvalidMemoryId,
    InvalidQuery,
    InvalidReScope,
    InvalidSessionId,
    MissingSessionId,
    ValidationFailed,
)
from loopmem.http.inputs import (
    FlagField,
    IsoDateTimeField,
    IsoDateTimeOrDateField,
    JSONObjectField,
    LenientIntField,
    OptionalUUIDField,
    ProjectIdField,
    QueryTagsField,
    SessionIdField,
    StrictFloatField,
    TagsField,
    TextField,
    WireField,
    session_id_schema,
)
from loopmem.params import MAX_SESSION_ID_BYTES, canonical_uuid_or, session_id_problem
from memory.filters import MAX_FILTER_TAG_LENGTH, MAX_FILTER_TAGS, MemoryFilters
from memory.importing import ImportRow
from memory.models import MAX_TEXT_BYTES, Memory, PromotionJob, SessionTurn
from memory.recall_modes import DEFAULT_MODE, RECALL_MODES, RecallMode
from memory.selectors import DEFAULT_RECALL_K

TIERS = ("long_term", "session")


def _tier(value: object) -> str:
    """Absent, null or "" is long_term; any other value must name a tier (false, 0 or [] are not "absent")."""
    if value is None or value == "":
        return "long_term"
    for tier in TIERS:
        if value == tier:
            return tier
    raise ValidationFailed(details={"tier": [f"must be one of {', '.join(TIERS)}"]})


class TierIn(serializers.Serializer):  # type: ignore[type-arg]
    """POST /api/v1/memory: which tier the body is for (and its project, checked first)."""

    project_id = ProjectIdField()
    tier = WireField(
        _tier,
        schema={"type": "string", "enum": [*TIERS, ""], "nullable": True, "description": "absent is long_term"},
    )


# --- A memory's writable fields: one definition each, for remember, import lines and corrections alike ---------


def memory_metadata() -> serializers.DictField:
    """A memory's or a turn's metadata: any JSON object; null is empty (`validate_metadata`)."""
    return serializers.DictField(required=False, allow_null=True)


class MemoryFieldsIn(serializers.Serializer):  # type: ignore[type-arg]
    """What a memory is written with: text not blank and at most 100,000 bytes, a confidence in 0..1 (1 when
    absent), bounded tags and metadata, null tags and metadata being empty."""

    text = TextField(trim_whitespace=False)
    confidence = StrictFloatField(min_value=0.0, max_value=1.0, default=1.0)
    tags = TagsField()
    metadata = memory_metadata()

    def validate_text(self, value: str) -> str:
        return validate_text_bytes(value)

    def validate_tags(self, value: list[str] | None) -> list[str]:
        return value or []

    def validate_metadata(self, value: dict[str, Any] | None) -> dict[str, Any]:
        return value or {}


class RememberIn(MemoryFieldsIn):
    """POST /api/v1/memory, long-term tier."""

    source_session_id = TextField(max_length=200, required=False, allow_null=True, allow_blank=True)

    def validate_source_session_id(self, value: str | None) -> str | None:
        return value or None


# Where a memory or a session turn lives, first in every answer that shows one.
ROW_FIELDS = ["id", "tier", "tenant_id", "subject_id", "project_id"]


# No docstring: the OpenAPI components of its subclasses would take it as their description.
class _TierRowOut(serializers.ModelSerializer):  # type: ignore[type-arg]
    tier_name: ClassVar[str]

    tier = serializers.SerializerMethodField()
    tenant_id = serializers.UUIDField(read_only=True)
    project_id = serializers.UUIDField(read_only=True, allow_null=True)

    def get_tier(self, row: Memory | SessionTurn) -> str:
        return self.tier_name


class MemoryOut(_TierRowOut):
    """memory_data: never the embedding."""

    tier_name = "long_term"
    superseded_by = serializers.UUIDField(source="superseded_by_id", read_only=True, allow_null=True)

    class Meta:
        model = Memory
        fields = [
            *ROW_FIELDS,
            "text",
            "confidence",
            "source",
            "source_session_id",
            "tags",
            "metadata",
            "superseded_by",
            "inserted_at",
            "updated_at",
        ]


@extend_schema_field(
    {
        "anyOf": [{"type": "string", "format": "date-time"}, {"type": "string", "maxLength": 0}],
        "nullable": True,
        "description": "ISO 8601 (naive means UTC); null or blank is the server's default",
    }
)
class ExpiresAtField(IsoDateTimeField):
    """A turn's expiry; none (null or "") is the server's default."""


@extend_schema_field(session_id_schema(required=True))
class SessionIdText(TextField):
    """A turn's session id, checked by `validate_session_id`; the schema states the same rule."""


class SessionTurnIn(serializers.Serializer):  # type: ignore[type-arg]
    """POST /api/v1/memory with tier "session"."""

    session_id = SessionIdText(trim_whitespace=False)
    role = serializers.ChoiceField(choices=SessionTurn.Role.choices)
    content = TextField(trim_whitespace=False)
    metadata = memory_metadata()
    expires_at = ExpiresAtField(required=False, allow_null=True)

    def validate_session_id(self, value: str) -> str:
        return validate_session_id(value)

    def validate_content(self, value: str) -> str:
        return validate_text_bytes(value)

    def validate_metadata(self, value: dict[str, Any] | None) -> dict[str, Any]:
        return value or {}


def validate_session_id(value: str) -> str:
    """The session-id rule as field messages (a session turn, the history path)."""
    problem = session_id_problem(value)
    if problem == "missing":
        raise serializers.ValidationError("must not be blank")
    if problem == "too_long":
        raise serializers.ValidationError(f"too long (max {MAX_SESSION_ID_BYTES} bytes)")
    return value


class SessionIdIn(serializers.Serializer):  # type: ignore[type-arg]
    """GET /api/v1/memory/sessions/:session_id: the path's session id."""

    session_id = serializers.CharField(trim_whitespace=False, allow_blank=True)

    def validate_session_id(self, value: str) -> str:
        return validate_session_id(value)


def _recall_query(value: object) -> str:
    """A memory recall's query: any text, untrimmed and unbounded; absent or null is empty (the search-query rule
    of merged recall and knowledge search does not apply)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidQuery()
    return value


def _memory_id(value: object) -> str:
    # As text: the graduation service reads it as it reads a path's id.
    return str(canonical_uuid_or(value, InvalidMemoryId))


def _re_scope(value: object) -> str:
    if value not in (None, "inherit", "global"):
        raise InvalidReScope()
    return str(value or "inherit")


# --- Filters (recall, merged recall, list) ---------------------------------------------------------------------


FILTER_FIELDS = (
    "tags",
    "tags_any",
    "metadata",
    "source",
    "created_after",
    "created_before",
    "min_confidence",
    "occurred_after",
    "occurred_before",
)


class MemoryFiltersIn(serializers.Serializer):  # type: ignore[type-arg]
    """The memory filters, as body fields (recall, merged recall) or query parameters (list).

    Validated into one `filters: MemoryFilters` entry (the filter fields themselves are removed); a malformed
    filter is 422 `validation_failed` naming its field.
    """

    tags = QueryTagsField(max_tags=MAX_FILTER_TAGS, max_length=MAX_FILTER_TAG_LENGTH)
    tags_any = QueryTagsField(max_tags=MAX_FILTER_TAGS, max_length=MAX_FILTER_TAG_LENGTH)
    metadata = JSONObjectField(required=False, allow_null=True)
    # The metaclass collects declared fields, so this `source` never shadows Field.source at run time.
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=Memory.Source.choices, required=False, allow_null=True, allow_blank=True
    )
    created_after = IsoDateTimeOrDateField(required=False, allow_null=True)
    created_before = IsoDateTimeOrDateField(required=False, allow_null=True)
    min_confidence = StrictFloatField(min_value=0.0, max_value=1.0, required=False, allow_null=True)
    occurred_after = IsoDateTimeOrDateField(required=False, allow_null=True)
    occurred_before = IsoDateTimeOrDateField(required=False, allow_null=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = dict(attrs)
        values = {name: attrs.pop(name, None) for name in FILTER_FIELDS}
        attrs["filters"] = memory_filters(values)
        return attrs


def memory_filters(values: Mapping[str, Any]) -> MemoryFilters:
    """Validated filter values → the typed filters (blank source and empty lists narrow nothing)."""
    return MemoryFilters(
        tags=tuple(values.get("tags") or ()),
        tags_any=tuple(values.get("tags_any") or ()),
        metadata=values.get("metadata") or None,
        source=values.get("source") or None,
        created_after=values.get("created_after"),
        created_before=values.get("created_before"),
        min_confidence=values.get("min_confidence"),
        occurred_after=_utc_day(values.get("occurred_after")),
        occurred_before=_utc_day(values.get("occurred_before")),
    )


def _utc_day(moment: datetime | None) -> date | None:
    """The UTC day of an event-time bound (a naive value is UTC already)."""
    if moment is None:
        return None
    return moment.astimezone(UTC).date() if moment.tzinfo is not None else moment.date()


RECALL_MODE_SCHEMA = {
    "type": "string",
    "enum": [*RECALL_MODES, ""],
    "nullable": True,
    "description": f"absent, null or blank is {DEFAULT_MODE}",
}


def recall_mode(value: object) -> RecallMode:
    """`mode` of a recall: absent, null or "" is today's `semantic`; anything but a known mode is 422."""
    if value is None or value == "":
        return DEFAULT_MODE
    for mode in RECALL_MODES:
        if value == mode:
            return mode
    raise ValidationFailed(details={"mode": [f"must be one of {', '.join(RECALL_MODES)}"]})


class RecallIn(MemoryFiltersIn):
    """POST /api/v1/memory/recall, a read sent as POST. `project_id` is checked before anything else (its error
    stops parsing at once), then the filters and the other fields."""

    project_id = ProjectIdField()
    query = WireField(
        _recall_query, schema={"type": "string", "nullable": True, "description": "422 `invalid_query` if not"}
    )
    limit = LenientIntField(DEFAULT_RECALL_K)
    include_superseded = FlagField()
    mode = WireField(recall_mode, schema=RECALL_MODE_SCHEMA)


class PromoteIn(serializers.Serializer):  # type: ignore[type-arg]
    """POST /api/v1/memory/promote."""

    session_id = SessionIdField(missing=MissingSessionId, too_long=InvalidSessionId)


class GraduateIn(serializers.Serializer):  # type: ignore[type-arg]
    """POST /api/v1/memory/graduate."""

    memory_id = WireField(
        _memory_id,
        required=True,
        allow_null=False,
        schema={"type": "string", "format": "uuid", "description": "one of your memories (422 `invalid_memory_id`)"},
    )
    re_scope = WireField(
        _re_scope,
        schema={"type": "string", "enum": ["inherit", "global"], "nullable": True, "description": "absent is inherit"},
    )


class MemoryListIn(MemoryFiltersIn):
    """GET /api/v1/memory query parameters and the filters; an unknown `source` applies no filter (reference
    §2.3), every other malformed filter is 422."""

    include_superseded = FlagField()
    # The metaclass collects declared fields, so this `source` never shadows Field.source at run time.
    source = serializers.CharField(required=False, allow_blank=True, default=None)  # type: ignore[assignment]
    all_subjects = FlagField()

    def validate_source(self, value: str | None) -> str | None:
        return value if value in Memory.Source.values else None


# --- Corrections, batch, import --------------------------------------------------------------------------------

PATCH_FIELDS = ("text", "confidence", "tags", "metadata")  # MemoryFieldsIn's


class MemoryPatchIn(MemoryFieldsIn):
    """PATCH /api/v1/memory/:id: remember's fields under remember's rules, but partial (an absent field keeps its
    value, so no default applies); at least one of them, and any other field is refused."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, partial=True, **kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(PATCH_FIELDS))
            if unknown:
                raise serializers.ValidationError(
                    {name: [f"unknown field: a correction takes {', '.join(PATCH_FIELDS)}"] for name in unknown}
                )
            if not any(name in data for name in PATCH_FIELDS):
                raise serializers.ValidationError({"body": [f"give at least one of {', '.join(PATCH_FIELDS)}"]})
        return super().to_internal_value(data)


MAX_BATCH = 100


class BatchIn(serializers.Serializer):  # type: ignore[type-arg]
    """POST /api/v1/memory/batch: 1 to 100 remember bodies; each item is validated on its own later."""

    memories = serializers.ListField(child=serializers.JSONField(), min_length=1, max_length=MAX_BATCH)


class ExportIn(serializers.Serializer):  # type: ignore[type-arg]
    """GET /api/v1/memory/export query parameters."""

    include_superseded = FlagField()


class ImportLineIn(RememberIn):
    """One memory of an import (an export line): a remember body plus the ids that rebuild its chain.

    Export lines carry more (tier, tenant_id, subject_id, source, timestamps): those fields are ignored, and
    every imported row has source `imported`. A `project_id` that is a project of your tenant is kept. A readable
    `inserted_at` is the day the text's relative dates ("last Friday") count from; anything else there is ignored.
    """

    id = OptionalUUIDField()
    superseded_by = OptionalUUIDField()
    supersedes = OptionalUUIDField()
    project_id = OptionalUUIDField()

    def row(self, line: int | None = None) -> ImportRow:
        data = self.validated_data
        return ImportRow(
            line=line,
            text=data["text"],
            confidence=data["confidence"],
            tags=data.get("tags") or [],
            metadata=data.get("metadata") or {},
            source_session_id=data.get("source_session_id") or None,
            project_id=data.get("project_id"),
            origin_id=data.get("id"),
            superseded_by=data.get("superseded_by"),
            supersedes=data.get("supersedes"),
            said_on=_written_on(self.initial_data),
        )


def _written_on(line: Any) -> date | None:
    """The UTC day of an export line's `inserted_at`, when it reads as an ISO 8601 datetime; else None."""
    value = line.get("inserted_at") if isinstance(line, Mapping) else None
    if not isinstance(value, str):
        return None
    try:
        return _utc_day(parse_datetime(value.strip()))
    except (ValueError, OverflowError):  # "2026-02-30T10:00", or an offset past the calendar's end
        return None


class SessionTurnOut(_TierRowOut):  # its docstring would become its OpenAPI description, which has none
    tier_name = "session"

    class Meta:
        model = SessionTurn
        fields = [
            *ROW_FIELDS,
            "session_id",
            "role",
            "content",
            "metadata",
            "expires_at",
            "seq",
            "inserted_at",
        ]


class PromotionCountsOut(serializers.Serializer):  # type: ignore[type-arg]
    """What a promotion job's compile and persist did: `written` counts new rows, superseding ones included."""

    candidates = serializers.IntegerField()
    gated_out = serializers.IntegerField()
    quarantined = serializers.IntegerField(
        help_text="Candidates the injection guard refused (aimed at the memory system, or relaxing a control)."
    )
    deduplicated = serializers.IntegerField()
    superseded = serializers.IntegerField()
    written = serializers.IntegerField()


class PromotionJobOut(serializers.ModelSerializer):  # type: ignore[type-arg]
    """A promotion job as its caller sees it: no job id (reference §2.5), no tenant, no subject."""

    status = serializers.ChoiceField(choices=PromotionJob.Status.choices, read_only=True)
    compiler = serializers.SerializerMethodField()
    outcome = serializers.SerializerMethodField()
    counts = PromotionCountsOut(source="*", read_only=True)

    class Meta:
        model = PromotionJob
        fields = [
            "session_id",
            "status",
            "compiler",
            "trigger",
            "outcome",
            "attempts",
            "counts",
            "memory_ids",
            "inserted_at",
            "started_at",
            "finished_at",
            "updated_at",
        ]

    def get_compiler(self, job: PromotionJob) -> str | None:
        return job.compiler or None

    def get_outcome(self, job: PromotionJob) -> str | None:
        return job.outcome or None


def validate_text_bytes(value: str) -> str:
    """Memory text and session content: not blank (whitespace alone is blank, as "" is) and at most 100,000 bytes
    (not characters)."""
    if not value.strip():
        raise serializers.ValidationError("This field may not be blank.", code="blank")
    size = len(value.encode())
    if size > MAX_TEXT_BYTES:
        raise serializers.ValidationError(f"exceeds maximum size of {MAX_TEXT_BYTES} bytes (got {size})")
    return value
