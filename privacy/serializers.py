"""Privacy's wire input: the erasure request."""

from __future__ import annotations

from rest_framework import serializers

from loopmem.inputs import FlagField, TextField
from loopmem.scope import MAX_SUBJECT_ID_BYTES


class ErasureIn(serializers.Serializer):  # type: ignore[type-arg]
    """POST /api/v1/erasures: which subject of the impersonated tenant, and how."""

    subject_id = TextField(trim_whitespace=False)
    include_articles = FlagField()
    dry_run = FlagField()

    def validate_subject_id(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("must not be blank")
        if len(value.encode()) > MAX_SUBJECT_ID_BYTES:
            raise serializers.ValidationError(f"too long (max {MAX_SUBJECT_ID_BYTES} bytes)")
        return value
