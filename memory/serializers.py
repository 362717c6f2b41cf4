"""Memory wire shapes (reference §2.1): input for remember, output for every read."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework import serializers

from loopmem.errors import (
    InvalidMemoryId,
    InvalidQuery,
    InvalidReScope,
    InvalidSessionId,
    MissingSessionId,
    ValidationFailed,
)
from loopmem.inputs import FlagField, LenientIntField, ProjectIdField, SessionIdField, WireField
from loopmem.params import canonical_uuid, session_id_problem
from loopmem.scope import MAX_SESSION_ID_BYTES
from memory.models import MAX_TEXT_BYTES, Memory, SessionTurn
from memory.recall_modes import DEFAULT_MODE, RECALL_MODES, RecallMode
from memory.selectors import DEFAULT_RECALL_K


class StrictFloatField(serializers.FloatField):
    """A number (or numeric string), but never a boolean."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool):
            self.fail("invalid")
        return float(super().to_internal_value(data))


TIERS = ("long_term", "session")


def _tier(value: object) -> str:
    tier = value or "long_term"
    if tier not in TIERS:
        raise ValidationFailed(details={"tier": [f"must be one of {', '.join(TIERS)}"]})
    return str(tier)


class TierIn(serializers.Serializer):  # type: ignore[type-arg]
    """POST /api/v1/memory: which tier the body is for (and its project, checked first)."""

    project_id = ProjectIdField()
    tier = WireField(_tier)


class RememberIn(serializers.Serializer):  # type: ignore[type-arg]
    """POST /api/v1/memory, long-term tier."""

    text = serializers.CharField(trim_whitespace=False)
    confidence = StrictFloatField(min_value=0.0, max_value=1.0, default=1.0)
    tags = serializers.ListField(
        child=serializers.CharField(max_length=200, trim_whitespace=False), required=False, allow_null=True
    )
    metadata = serializers.DictField(required=False, allow_null=True)
    source_session_id = serializers.CharField(max_length=200, required=False, allow_null=True, allow_blank=True)

    def validate_text(self, value: str) -> str:
        return validate_text_bytes(value)

    def validate_tags(self, value: list[str] | None) -> list[str]:
        return value or []

    def validate_metadata(self, value: dict[str, Any] | None) -> dict[str, Any]:
        return value or {}

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


class ExpiresAtField(serializers.Field):  # type: ignore[type-arg]
    """null or "" → None (server default); an ISO 8601 datetime (naive means UTC) → aware datetime."""

    default_error_messages = {"invalid": "must be an ISO 8601 datetime, got {value!r}"}

    def to_internal_value(self, data: Any) -> datetime | None:
        if data is None or data == "":
            return None
        parsed = parse_datetime(data) if isinstance(data, str) else None
        if parsed is None:
            self.fail("invalid", value=data)
        assert parsed is not None
        return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC)

    def to_representation(self, value: datetime) -> str:
        return value.isoformat()


class SessionTurnIn(serializers.Serializer):  # type: ignore[type-arg]
    """POST /api/v1/memory with tier "session"."""

    session_id = serializers.CharField(trim_whitespace=False)
    role = serializers.ChoiceField(choices=SessionTurn.Role.choices)
    content = serializers.CharField(trim_whitespace=False)
    metadata = serializers.DictField(required=False, allow_null=True)
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


def recall_mode(value: object) -> RecallMode:
    """`mode` of a recall: absent, null or "" is today's `semantic`; anything but a known mode is 422."""
    if value is None or value == "":
        return DEFAULT_MODE
    for mode in RECALL_MODES:
        if value == mode:
            return mode
    raise ValidationFailed(details={"mode": [f"must be one of {', '.join(RECALL_MODES)}"]})


class RecallIn(serializers.Serializer):  # type: ignore[type-arg]
    """POST /api/v1/memory/recall, a read sent as POST. `project_id` first: it is checked before anything else."""

    project_id = ProjectIdField()
    query = WireField(_query)
    limit = LenientIntField(DEFAULT_RECALL_K)
    include_superseded = FlagField()
    mode = WireField(recall_mode)


class PromoteIn(serializers.Serializer):  # type: ignore[type-arg]
    """POST /api/v1/memory/promote."""

    session_id = SessionIdField(missing=MissingSessionId, too_long=InvalidSessionId)


class GraduateIn(serializers.Serializer):  # type: ignore[type-arg]
    """POST /api/v1/memory/graduate."""

    memory_id = WireField(_memory_id)
    re_scope = WireField(_re_scope)


class MemoryListIn(serializers.Serializer):  # type: ignore[type-arg]
    """GET /api/v1/memory query parameters; an unknown `source` applies no filter (reference §2.3)."""

    include_superseded = FlagField()
    # The metaclass collects declared fields, so this `source` never shadows Field.source at run time.
    source = serializers.CharField(required=False, allow_blank=True, default=None)  # type: ignore[assignment]
    all_subjects = FlagField()


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


def validate_text_bytes(value: str) -> str:
    """Memory text and session content: at most 100,000 bytes (not characters)."""
    size = len(value.encode())
    if size > MAX_TEXT_BYTES:
        raise serializers.ValidationError(f"exceeds maximum size of {MAX_TEXT_BYTES} bytes (got {size})")
    return value
