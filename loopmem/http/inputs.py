"""The one input layer: how wire values become typed values, for every endpoint alike.

Each rule lives once in `loopmem.params` (the canonical UUID, `project_id`, the session-id rule, lenient limits
and flags) and reaches the API through the DRF fields here, which raise our domain errors: codes and messages
stay stable, and services receive typed values, never wire input. A field's own error (an `InvalidProjectId`,
say) stops parsing at once; plain DRF validation errors are gathered per field into 422 `validation_failed`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from rest_framework import serializers
from rest_framework.request import Request

from loopmem.errors import DomainError, ValidationFailed
from loopmem.params import (
    CANONICAL_UUID_PATTERN,
    MAX_SESSION_ID_BYTES,
    NOT_BLANK_PATTERN,
    lenient_int,
    project_id_from,
    session_id_problem,
    truthy,
)

if TYPE_CHECKING:
    from django.utils.functional import _StrPromise  # the stubs' type of a lazy message

S = TypeVar("S", bound=serializers.Serializer)  # type: ignore[type-arg]


# --- Parsing a request ----------------------------------------------------------------------------------------


def json_object(request: Request) -> dict[str, Any]:
    """The parsed body; anything but a JSON object is 422 `validation_failed`."""
    if not isinstance(request.data, dict):
        raise ValidationFailed("The request body must be a JSON object", details={"body": ["must be an object"]})
    return request.data


def parse(serializer_class: type[S], data: Mapping[str, Any]) -> dict[str, Any]:
    """Validate `data` with an input serializer; its `validated_data` maps 1:1 onto a service's arguments."""
    parsed = serializer_class(data=data)
    parsed.is_valid(raise_exception=True)
    return dict(parsed.validated_data)


def parse_body(serializer_class: type[S], request: Request) -> dict[str, Any]:
    """`parse` over the request's JSON-object body."""
    return parse(serializer_class, json_object(request))


# --- Fields ---------------------------------------------------------------------------------------------------


class WireField(serializers.Field):  # type: ignore[type-arg]
    """A field whose whole parsing is one of the rules above (nulls included); it never renders output.

    A rule is code, so the field cannot describe itself to the OpenAPI schema: `schema` is the JSON schema of
    what the rule accepts (`loopmem.http.openapi` publishes it), and `required=True` only marks the field required
    there: a rule that refuses absence raises its own error either way."""

    def __init__(self, rule: Callable[[object], Any], *, schema: dict[str, Any] | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)
        self.rule = rule
        self.schema: dict[str, Any] = schema or {}

    def validate_empty_values(self, data: Any) -> tuple[bool, Any]:
        if data is serializers.empty:
            # Absent: the rule decides what absent means (a default, None, or its own error).
            return True, self.rule(None)
        return False, data

    def to_internal_value(self, data: Any) -> Any:
        return self.rule(data)

    def to_representation(self, value: Any) -> Any:
        return value


PROJECT_ID_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "format": "uuid", "pattern": f"^{CANONICAL_UUID_PATTERN}$"},
        {"type": "string", "pattern": r"^\s*$"},
    ],
    "nullable": True,
    "description": "the canonical UUID of one of your tenant's projects (422 `invalid_project_id` otherwise); "
    "null or blank is global",
}


def ProjectIdField() -> WireField:
    """`project_id`: blank is global, else a canonical UUID (422 `invalid_project_id`)."""
    return WireField(project_id_from, schema=PROJECT_ID_SCHEMA)


def lenient_int_schema(default: int, bounds: str = "") -> dict[str, Any]:
    """A lenient integer accepts any value: its leading integer is read, anything else is the default."""
    return {
        "description": f"an integer{bounds}; read leniently (a string's leading integer; anything else, or "
        f"absent, is {default})",
        "example": default,
    }


def LenientIntField(default: int) -> WireField:
    """A limit read the reference's way: a leading integer, or the default."""
    return WireField(lambda value: lenient_int(value, default), schema=lenient_int_schema(default))


FLAG_SCHEMA: dict[str, Any] = {
    "description": 'a flag: only `true` (or the string "true") turns it on; any other value, or absent, is off',
    "example": True,
}


def FlagField() -> WireField:
    """A flag that only `true` / "true" turns on."""
    return WireField(truthy, schema=FLAG_SCHEMA)


def session_id_schema(*, required: bool) -> dict[str, Any]:
    """The session-id rule as JSON schema (the 200 bytes are UTF-8 bytes: characters for ASCII text)."""
    limit = {"type": "string", "maxLength": MAX_SESSION_ID_BYTES}
    if not required:
        return {**limit, "nullable": True, "description": "opaque, at most 200 bytes of UTF-8; blank is none"}
    return {
        **limit,
        "minLength": 1,
        "pattern": NOT_BLANK_PATTERN,
        "description": f"opaque, not blank, at most {MAX_SESSION_ID_BYTES} bytes of UTF-8 (never truncated)",
    }


def SessionIdField(
    *, missing: Callable[[], DomainError] | None, too_long: Callable[[], DomainError], strip: bool = False
) -> WireField:
    """The session-id rule with an endpoint's own errors; `missing=None` makes it optional (blank → None)."""

    def rule(value: object) -> str | None:
        problem = session_id_problem(value)
        if problem == "missing" and missing is None and (value is None or isinstance(value, str)):
            return None
        if problem == "missing":
            raise (missing or too_long)()
        if problem == "too_long":
            raise too_long()
        assert isinstance(value, str)
        return value.strip() if strip else value

    required = missing is not None
    return WireField(rule, schema=session_id_schema(required=required), required=required, allow_null=not required)


class TextField(serializers.CharField):
    """Text, and only text: a number or a boolean is not silently turned into "0" or "True"."""

    default_error_messages: ClassVar[dict[str, str | _StrPromise]] = {"not_text": "must be a string"}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_text")
        return str(super().to_internal_value(data))


def TagsField(*, max_tags: int = 64, max_length: int = 200) -> serializers.ListField:
    """A bounded list of tags (count and length): thousands of tags on one row are an abuse, not data."""
    return serializers.ListField(
        child=TextField(max_length=max_length, trim_whitespace=False),
        max_length=max_tags,
        required=False,
        allow_null=True,
    )
