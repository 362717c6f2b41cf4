"""OpenAPI for /api/v1/erasures (superadmin keys only), with every error it can give."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view, inline_serializer
from rest_framework import serializers

from loopmem.errors import Forbidden, ValidationFailed
from loopmem.http.openapi import data_envelope, responses
from privacy.serializers import ErasureIn

ERASURE_OUT = data_envelope(
    "ErasureOut",
    inline_serializer(
        "ErasureReport",
        {
            "tenant_id": serializers.UUIDField(),
            "subject_id": serializers.CharField(),
            "dry_run": serializers.BooleanField(),
            "include_articles": serializers.BooleanField(),
            "removed": serializers.DictField(child=serializers.IntegerField(), help_text="rows per kind"),
            "articles": serializers.ListField(child=serializers.DictField()),
        },
    ),
)

erasure_schema = extend_schema_view(
    # Any key but a superadmin's (impersonating the subject's tenant) is 403 `forbidden`.
    create=extend_schema(
        request=ErasureIn,
        responses=responses({200: ERASURE_OUT}, Forbidden, ValidationFailed, body=True, write=True),
    ),
)
