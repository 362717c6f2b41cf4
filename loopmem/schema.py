"""OpenAPI: describe the bearer-key authentication and the rule-parsed wire fields to drf-spectacular."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerFieldExtension


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "loopmem.auth.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "Authorization: Bearer <api key>"}


class WireFieldScheme(OpenApiSerializerFieldExtension):  # type: ignore[no-untyped-call]
    """A `WireField` parses with a rule, not a type: described as any JSON value, with the field's help text."""

    target_class = "loopmem.inputs.WireField"

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return {}
