"""Memory wire shapes (reference §2.1): input for remember, output for every read."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, time
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty
from rest_framework.utils import html

from loopmem.errors import (
    InvalidMemoryId,
    InvalidQuery,
    InvalidReScope,
    InvalidSessionId,
    MissingSessionId,
    ValidationFailed,
)
from loopmem.http.edge import loads_json
from loopmem.http.inputs import (
    FlagField,
    LenientIntField,
    ProjectIdField,
    SessionIdField,
    TagsField,
    TextField,
    WireField,
    session_id_schema,
)
from loopmem.params import MAX_SESSION_ID_BYTES, canonical_uuid, session_id_problem
from memory.filters import MAX_FILTER_TAG_LENGTH, MAX_FILTER_TAGS, MemoryFilters
from memory.models import MAX_TEXT_BYTES, Memory, PromotionJob, SessionTurn
from memory.recall_modes import DEFAULT_MODE, RECALL_MODES, RecallMode
from memory.selectors import DEFAULT_RECALL_K
from memory.services import ImportRow


class StrictFloatField(serializers.FloatField):
    """A number (or numeric string), but never a boolean."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool):
            self.fail("invalid")
        return float(super().to_internal_value(data))


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


def memory_text(*, required: bool = True) -> TextField:
    return TextField(trim_whitespace=False, required=required)


def memory_confidence(**kwargs: Any) -> StrictFloatField:
    return StrictFloatField(min_value=0.0, max_value=1.0, **kwargs)


def memory_metadata() -> serializers.DictField:
    return serializers.DictField(required=False, allow_null=True)


class MemoryFieldRules:
    """The rules after parsing, shared by every serializer declaring the fields above (DRF calls `validate_<name>`):
    text is not blank and at most 100,000 bytes; null tags and metadata are empty."""

    def validate_text(self, value: str) -> str:
        return validate_text_bytes(value)

    def validate_tags(self, value: list[str] | None) -> list[str]:
        return value or []

    def validate_metadata(self, value: dict[str, Any] | None) -> dict[str, Any]:
        return value or {}


class RememberIn(MemoryFieldRules, serializers.Serializer):  # type: ignore[type-arg]
    """POST /api/v1/memory, long-term tier."""

    text = memory_text()
    confidence = memory_confidence(default=1.0)
    tags = TagsField()
    metadata = memory_metadata()
    source_session_id = TextField(max_length=200, required=False, allow_null=True, allow_blank=True)

    def validate_source_session_id(self, value: str | None) -> str | None:
        return value or None


class MemoryOut(serializers.ModelSerializer):  # type: ignore[type-arg]
    """memory_data: never the embedding."""

    tier = serializers.SerializerMethodField()
    tenant_id = serializers.UUIDField(read_only=True)
    project_id = serializers.UUIDField(read_only=True, allow_null=True)
    superseded_by = serializers.UUIDField(source="superseded_by_id", read_only=True, allow_null=True)

    class Meta:
        model = Memory
        fields = [
            "id",
            "tier",
            "tenant_id",
            "subject_id",
            "project_id",
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

    def get_tier(self, memory: Memory) -> str:
        return "long_term"


@extend_schema_field(
    {
        "anyOf": [{"type": "string", "format": "date-time"}, {"type": "string", "maxLength": 0}],
        "nullable": True,
        "description": "ISO 8601 (naive means UTC); null or blank is the server's default",
    }
)
class ExpiresAtField(serializers.Field):  # type: ignore[type-arg]
    """null or "" → None (server default); an ISO 8601 datetime (naive means UTC) → aware datetime."""

    default_error_messages = {"invalid": "must be an ISO 8601 datetime, got {value!r}"}

    def to_internal_value(self, data: Any) -> datetime | None:
        if data is None or data == "":
            return None
        try:
            parsed = parse_datetime(data) if isinstance(data, str) else None
            if parsed is None:
                self.fail("invalid", value=data)
            assert parsed is not None
            aware = parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC)
            # Year 0 does not parse; an offset past the calendar's end only overflows when made UTC: both are 422.
            return aware.astimezone(UTC)
        except (ValueError, OverflowError):
            self.fail("invalid", value=data)

    def to_representation(self, value: datetime) -> str:
        return value.isoformat()


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


def _query(value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidQuery()
    return value


def _memory_id(value: object) -> str:
    parsed = canonical_uuid(value)
    if parsed is None:
        raise InvalidMemoryId()
    return str(parsed)


def _re_scope(value: object) -> str:
    if value not in (None, "inherit", "global"):
        raise InvalidReScope()
    return str(value or "inherit")


# --- Filters (recall, merged recall, list) ---------------------------------------------------------------------


class FilterTagsField(serializers.ListField):
    """A list of tags; in a query string, repeated (`?tags=a&tags=b`) and/or comma-separated (`?tags=a,b`)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            child=TextField(max_length=MAX_FILTER_TAG_LENGTH, trim_whitespace=False),
            required=False,
            allow_null=True,
            max_length=MAX_FILTER_TAGS,
            **kwargs,
        )

    def get_value(self, dictionary: Any) -> Any:
        if html.is_html_input(dictionary):
            values = dictionary.getlist(self.field_name)
            if not values:
                return empty
            parts = [part for value in values for part in str(value).split(",")]
            # Empty parts (`a,,b`, a bare `tags=`) narrow nothing, but they count toward the bound: more parts
            # than it is a flood however many are empty.
            return parts if len(parts) > MAX_FILTER_TAGS else [part for part in parts if part != ""]
        return super().get_value(dictionary)

    def to_internal_value(self, data: Any) -> list[Any]:
        # The bound first, so a flood of empty parts is refused for its size, not item by item.
        if isinstance(data, list) and len(data) > MAX_FILTER_TAGS:
            self.fail("max_length", max_length=MAX_FILTER_TAGS)
        return list(super().to_internal_value(data))


@extend_schema_field(OpenApiTypes.OBJECT)
class JSONObjectField(serializers.Field):  # type: ignore[type-arg]
    """A JSON object, or (in a query string) its JSON text."""

    default_error_messages = {"invalid": "must be a JSON object"}

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, str):
            try:
                data = loads_json(data, where=f"query.{self.field_name}")
            except ValueError:
                self.fail("invalid")
        if not isinstance(data, dict):
            self.fail("invalid")
        return dict(data)

    def to_representation(self, value: Any) -> Any:
        return value


# A time filter: an ISO 8601 datetime or date; blank is no filter (the body field and the query parameter alike).
FILTER_TIME_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "format": "date-time"},
        {"type": "string", "format": "date"},
        {"type": "string", "enum": [""]},
    ]
}


@extend_schema_field(FILTER_TIME_SCHEMA)
class FilterDateTimeField(serializers.Field):  # type: ignore[type-arg]
    """An ISO 8601 datetime or date (naive means UTC; a date is its midnight); blank means no filter."""

    default_error_messages = {"invalid": "must be an ISO 8601 datetime or date, got {value!r}"}

    def to_internal_value(self, data: Any) -> datetime | None:
        if data is None or data == "":
            return None
        parsed: datetime | None = None
        if isinstance(data, str):
            try:
                parsed = parse_datetime(data.strip())
                if parsed is None and (day := parse_date(data.strip())) is not None:
                    parsed = datetime.combine(day, time.min)
            except ValueError:
                parsed = None
        if parsed is None:
            self.fail("invalid", value=data)
        assert parsed is not None
        aware = parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC)
        try:
            # In UTC: PostgreSQL refuses an offset past ±15:59 that Python accepts (up to ±23:59).
            return aware.astimezone(UTC)
        except OverflowError:
            self.fail("invalid", value=data)

    def to_representation(self, value: datetime) -> str:
        return value.isoformat()


FILTER_FIELDS = ("tags", "tags_any", "metadata", "source", "created_after", "created_before", "min_confidence")


class MemoryFiltersIn(serializers.Serializer):  # type: ignore[type-arg]
    """The memory filters, as body fields (recall, merged recall) or query parameters (list).

    Validated into one `filters: MemoryFilters` entry (the filter fields themselves are removed); a malformed
    filter is 422 `validation_failed` naming its field.
    """

    tags = FilterTagsField()
    tags_any = FilterTagsField()
    metadata = JSONObjectField(required=False, allow_null=True)
    # The metaclass collects declared fields, so this `source` never shadows Field.source at run time.
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=Memory.Source.choices, required=False, allow_null=True, allow_blank=True
    )
    created_after = FilterDateTimeField(required=False, allow_null=True)
    created_before = FilterDateTimeField(required=False, allow_null=True)
    min_confidence = StrictFloatField(min_value=0.0, max_value=1.0, required=False, allow_null=True)

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
    )


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
    query = WireField(_query, schema={"type": "string", "nullable": True, "description": "422 `invalid_query` if not"})
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

PATCH_FIELDS = ("text", "confidence", "tags", "metadata")


class MemoryPatchIn(MemoryFieldRules, serializers.Serializer):  # type: ignore[type-arg]
    """PATCH /api/v1/memory/:id: at least one of the fields, each under remember's rules; any other field is
    refused."""

    text = memory_text(required=False)
    confidence = memory_confidence(required=False)
    tags = TagsField()
    metadata = memory_metadata()

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


def _origin_id(value: object) -> uuid.UUID | None:
    if value is None or value == "":
        return None
    parsed = canonical_uuid(value)
    if parsed is None:
        raise serializers.ValidationError("must be a canonical UUID")
    return parsed


@extend_schema_field(
    {
        "anyOf": [{"type": "string", "format": "uuid"}, {"type": "string", "enum": [""]}],
        "nullable": True,
        "description": "a canonical UUID; null or blank is none",
    }
)
class OriginIdField(serializers.Field):  # type: ignore[type-arg]
    """An id as the import file gives it (an export's own ids): a canonical UUID, or null or "" for none."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(required=False, allow_null=True, **kwargs)

    def to_internal_value(self, data: Any) -> uuid.UUID | None:
        return _origin_id(data)

    def to_representation(self, value: Any) -> Any:
        return value


class ImportLineIn(RememberIn):
    """One memory of an import (an export line): a remember body plus the ids that rebuild its chain.

    Export lines carry more (tier, tenant_id, subject_id, source, timestamps): those fields are ignored, and
    every imported row has source `imported`. A `project_id` that is a project of your tenant is kept.
    """

    id = OriginIdField()
    superseded_by = OriginIdField()
    supersedes = OriginIdField()
    project_id = OriginIdField()

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
        )


MAX_IMPORT_BYTES = 10 * 1024 * 1024
MAX_IMPORT_ERRORS = 20


def import_rows(raw: bytes) -> list[ImportRow]:
    """An import body (NDJSON, or a JSON array of objects) → validated rows; any bad line is 422 for the whole
    body (nothing is written), naming up to 20 lines (`line N`, 1-based) and their fields."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValidationFailed(details={"body": ["must be UTF-8 text"]}) from None
    items: list[tuple[int, Any]] = []
    # The edge's rules (NUL, lone surrogates, numbers jsonb cannot hold, depth) hold for imported lines too.
    if text.lstrip().startswith("["):
        try:
            parsed = loads_json(text)
        except ValueError as exc:
            raise ValidationFailed(details={"body": [f"not a JSON array: {exc}"]}) from None
        items = list(enumerate(parsed, start=1))
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                items.append((number, loads_json(line, where=f"line {number}")))
            except ValueError:
                raise ValidationFailed(details={f"line {number}": ["not valid JSON"]}) from None
    rows: list[ImportRow] = []
    errors: dict[str, Any] = {}
    origins: set[uuid.UUID] = set()
    for number, item in items:
        if not isinstance(item, dict):
            errors[f"line {number}"] = ["must be a JSON object"]
        else:
            parsed = ImportLineIn(data=item)
            if not parsed.is_valid():
                errors[f"line {number}"] = json.loads(json.dumps(parsed.errors))  # ErrorDetail → plain strings
            else:
                row = parsed.row(number)
                if row.origin_id is not None and row.origin_id in origins:
                    errors[f"line {number}"] = {"id": ["appears on an earlier line"]}
                if row.origin_id is not None:
                    origins.add(row.origin_id)
                rows.append(row)
        if len(errors) >= MAX_IMPORT_ERRORS:
            break
    if errors:
        raise ValidationFailed(details=errors)
    return rows


class SessionTurnOut(serializers.ModelSerializer):  # type: ignore[type-arg]
    tier = serializers.SerializerMethodField()
    tenant_id = serializers.UUIDField(read_only=True)
    project_id = serializers.UUIDField(read_only=True, allow_null=True)

    class Meta:
        model = SessionTurn
        fields = [
            "id",
            "tier",
            "tenant_id",
            "subject_id",
            "project_id",
            "session_id",
            "role",
            "content",
            "metadata",
            "expires_at",
            "seq",
            "inserted_at",
        ]

    def get_tier(self, turn: SessionTurn) -> str:
        return "session"


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
