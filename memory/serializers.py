"""Memory wire shapes (reference §2.1): input for remember, output for every read."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from memory.models import MAX_TEXT_BYTES, Memory


class StrictFloatField(serializers.FloatField):
    """A number (or numeric string), but never a boolean."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool):
            self.fail("invalid")
        return float(super().to_internal_value(data))


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
        size = len(value.encode())
        if size > MAX_TEXT_BYTES:
            raise serializers.ValidationError(f"exceeds maximum size of {MAX_TEXT_BYTES} bytes (got {size})")
        return value

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
