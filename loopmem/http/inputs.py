"""The one input layer: how wire values become typed values, for every endpoint alike.

Each rule lives once in `loopmem.params` (the canonical UUID, `project_id`, the session-id and search-query
rules, lenient limits and flags) and reaches the API through the DRF fields here, which raise our domain errors:
codes and messages stay stable, and services receive typed values, never wire input. A field's own error (an
`InvalidProjectId`, say) stops parsing at once; plain DRF validation errors are gathered per field into 422
`validation_failed`. The generic shapes live here too: text that is only text, numbers that are not booleans,
ISO 8601 times, JSON objects (or their text in a query string), tag lists and optional ids.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, time
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty
from rest_framework.request import Request
from rest_framework.utils import html

from loopmem.errors import DomainError, ValidationFailed
from loopmem.http.edge import loads_json
from loopmem.params import (
    CANONICAL_UUID_PATTERN,
    MAX_QUERY_CHARS,
    MAX_SESSION_ID_BYTES,
    NOT_BLANK_PATTERN,
    canonical_uuid_or,
    lenient_int,
    project_id_from,
    query_problem,
    session_id_problem,
    trimmed_text_pattern,
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


# The search query's rule as JSON schema: `maxLength` counts the whitespace the rule trims, so a pattern states it.
QUERY_PATTERN = trimmed_text_pattern(MAX_QUERY_CHARS)


def QueryField(
    *, missing: Callable[[], DomainError], too_long: Callable[[], DomainError], description: str = ""
) -> WireField:
    """The search-query rule with an endpoint's own errors (its description names them); the query arrives
    trimmed."""

    def rule(value: object) -> str:
        problem = query_problem(value)
        if problem is not None:
            raise (missing if problem == "missing" else too_long)()
        assert isinstance(value, str)
        return value.strip()

    schema = {
        "type": "string",
        "pattern": QUERY_PATTERN,
        **({"description": description} if description else {}),
        "minLength": 1,
    }
    return WireField(rule, schema=schema, required=True, allow_null=False)


class StrictFloatField(serializers.FloatField):
    """A number (or numeric string), but never a boolean."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool):
            self.fail("invalid")
        return float(super().to_internal_value(data))


@extend_schema_field(
    {
        "anyOf": [{"type": "string", "format": "date-time"}, {"type": "string", "maxLength": 0}],
        "nullable": True,
        "description": "ISO 8601 (naive means UTC); null or blank is none",
    }
)
class IsoDateTimeField(serializers.Field):  # type: ignore[type-arg]
    """null or "" → None; an ISO 8601 datetime (naive means UTC) → that instant, in UTC."""

    default_error_messages: ClassVar[dict[str, str | _StrPromise]] = {
        "invalid": "must be an ISO 8601 datetime, got {value!r}"
    }

    def parse(self, text: str) -> datetime | None:
        return parse_datetime(text)

    def to_internal_value(self, data: Any) -> datetime | None:
        if data is None or data == "":
            return None
        try:
            parsed = self.parse(data) if isinstance(data, str) else None
            if parsed is None:
                self.fail("invalid", value=data)
            assert parsed is not None
            aware = parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC)
            # In UTC: PostgreSQL refuses an offset past ±15:59 that Python accepts (up to ±23:59). Year 0 does not
            # parse, and a time at the calendar's end overflows only when made UTC: both are 422.
            return aware.astimezone(UTC)
        except (ValueError, OverflowError):
            self.fail("invalid", value=data)

    def to_representation(self, value: datetime) -> str:
        return value.isoformat()


# An ISO 8601 datetime or date; blank is none (a body field and a query parameter alike).
DATETIME_OR_DATE_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "format": "date-time"},
        {"type": "string", "format": "date"},
        {"type": "string", "enum": [""]},
    ]
}


@extend_schema_field(DATETIME_OR_DATE_SCHEMA)
class IsoDateTimeOrDateField(IsoDateTimeField):
    """`IsoDateTimeField` that also takes a bare date (its midnight) and surrounding whitespace: a time bound a
    person types into a query string."""

    default_error_messages: ClassVar[dict[str, str | _StrPromise]] = {
        "invalid": "must be an ISO 8601 datetime or date, got {value!r}"
    }

    def parse(self, text: str) -> datetime | None:
        text = text.strip()
        if (parsed := parse_datetime(text)) is not None:
            return parsed
        day = parse_date(text)
        return datetime.combine(day, time.min) if day is not None else None


@extend_schema_field(OpenApiTypes.OBJECT)
class JSONObjectField(serializers.Field):  # type: ignore[type-arg]
    """A JSON object, or (in a query string) its JSON text, under the edge's JSON rules."""

    default_error_messages: ClassVar[dict[str, str | _StrPromise]] = {"invalid": "must be a JSON object"}

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


def split_tags(values: Iterable[object]) -> list[str]:
    """Tags as a query string gives them, repeated (`?tags=a&tags=b`) and/or comma-separated (`?tags=a,b`)."""
    return [part for value in values for part in str(value).split(",")]


class QueryTagsField(serializers.ListField):
    """A bounded list of tags to filter by; in a query string, `split_tags`, empty parts dropped."""

    def __init__(self, *, max_tags: int, max_length: int, **kwargs: Any) -> None:
        super().__init__(
            child=TextField(max_length=max_length, trim_whitespace=False),
            required=False,
            allow_null=True,
            max_length=max_tags,
            **kwargs,
        )
        self.max_tags = max_tags

    def get_value(self, dictionary: Any) -> Any:
        if html.is_html_input(dictionary):
            values = dictionary.getlist(self.field_name)
            if not values:
                return empty
            parts = split_tags(values)
            # Empty parts (`a,,b`, a bare `tags=`) narrow nothing, but they count toward the bound: more parts
            # than it is a flood however many are empty.
            return parts if len(parts) > self.max_tags else [part for part in parts if part != ""]
        return super().get_value(dictionary)

    def to_internal_value(self, data: Any) -> list[Any]:
        # The bound first, so a flood of empty parts is refused for its size, not item by item.
        if isinstance(data, list) and len(data) > self.max_tags:
            self.fail("max_length", max_length=self.max_tags)
        return list(super().to_internal_value(data))


OPTIONAL_UUID_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "string", "format": "uuid"}, {"type": "string", "enum": [""]}],
    "nullable": True,
    "description": "a canonical UUID; null or blank is none",
}


def _optional_uuid(value: object) -> uuid.UUID | None:
    if value is None or value == "":
        return None
    return canonical_uuid_or(value, lambda: serializers.ValidationError("must be a canonical UUID"))


def OptionalUUIDField() -> WireField:
    """A canonical UUID, or null or "" for none; anything else is a 422 naming the field."""
    return WireField(_optional_uuid, schema=OPTIONAL_UUID_SCHEMA)
