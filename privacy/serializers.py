"""Privacy's wire input: the erasure request."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from loopmem.http.inputs import FlagField, TextField
from loopmem.params import NOT_BLANK_PATTERN
from loopmem.tenancy.scope import MAX_SUBJECT_ID_BYTES


@extend_schema_field(
    {
        "type": "string",
        "pattern": NOT_BLANK_PATTERN,
        "maxLength": MAX_SUBJECT_ID_BYTES,
        "description": f"not blank, at most {MAX_SUBJECT_ID_BYTES} bytes of UTF-8",
    }
)
class SubjectIdField(TextField):
    """A subject id as `ErasureIn.validate_subject_id` accepts it (the schema says so)."""


class ErasureIn(serializers.Serializer):  # type: ignore[type-arg]
    """POST /api/v1/erasures: which subject of the impersonated tenant, and how."""

    subject_id = SubjectIdField(trim_whitespace=False)
    include_articles = FlagField()
    dry_run = FlagField()

    def validate_subject_id(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("must not be blank")
        if len(value.encode()) > MAX_SUBJECT_ID_BYTES:
            raise serializers.ValidationError(f"too long (max {MAX_SUBJECT_ID_BYTES} bytes)")
        return value
