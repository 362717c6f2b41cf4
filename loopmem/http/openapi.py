"""OpenAPI: the bearer-key authentication, the rule-parsed wire fields, the one error component and the helper
that gives every operation its whole set of error responses.

Each app's `schema.py` describes its operations with these (`extend_schema_view` on the viewset), so the views
keep only their code. An operation lists the errors its own code raises; `responses` adds the ones every
operation shares (the HTTP server's refusals, the key, the rate limit, the edge's checks of the URL and the body,
the custody halt of writes), groups them by status and publishes, per status, the `{"error": {...}}` component with
the exact set of `code`s it can carry. `precise_requests` then states the edge's text rule on everything a client
sends (`TEXT_RULE`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import is_list_serializer
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, inline_serializer
from rest_framework import serializers

from loopmem.errors import (
    BadRequest,
    DatabaseTimeout,
    DatabaseUnavailable,
    DomainError,
    ImpersonationTenantNotFound,
    ImpersonationTenantRequired,
    InvalidNumber,
    InvalidText,
    LengthRequired,
    PayloadTooLarge,
    RateLimited,
    SubjectIdUnresolvable,
    TenantHalted,
    TooDeeplyNested,
    Unauthorized,
    ValidationFailed,
)
from loopmem.http.inputs import PROJECT_ID_SCHEMA
from loopmem.http.server_refusals import CODES as SERVER_CODES
from loopmem.params import CANONICAL_UUID_PATTERN, DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT, TEXT_PATTERN


class EnvelopeAutoSchema(AutoSchema):
    """Every answer is an envelope (`{data, meta}` for lists): a response is an array only when its serializer
    says `many=True`, never because the action is called `list`."""

    def _is_list_view(self, serializer: Any = None) -> bool:
        if serializer is None:
            serializer = self.get_response_serializers()
        if isinstance(serializer, dict) and serializer:
            serializer = {str(code): s for code, s in serializer.items()}
            serializer = serializer[min(serializer)]
        return bool(is_list_serializer(serializer))


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "loopmem.http.auth.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "Authorization: Bearer <api key>"}


class WireFieldScheme(OpenApiSerializerFieldExtension):  # type: ignore[no-untyped-call]
    """A `WireField` parses with a rule, not a type: its `schema` says what the rule accepts."""

    target_class = "loopmem.http.inputs.WireField"

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return dict(self.target.schema)


# --- Errors -------------------------------------------------------------------------------------------------

# An error is a domain error class, or (status, code) for DRF's own errors that have no domain twin.
ErrorSpec = type[DomainError] | tuple[int, str]

UNSUPPORTED_MEDIA_TYPE: ErrorSpec = (415, "unsupported_media_type")
NOT_ACCEPTABLE: ErrorSpec = (406, "not_acceptable")

# The HTTP server's own refusals, before any application code and in the same envelope (loopmem.http.server_refusals):
# a malformed request line or header (400), a request line over 4094 bytes (414), an `Expect` other than
# 100-continue (417), more than 100 headers or one over 8190 bytes (431), a transfer coding it does not know (501).
SERVER: tuple[ErrorSpec, ...] = tuple((status, SERVER_CODES[status]) for status in (400, 414, 417, 431, 501))
# Every /api/v1 operation: the server's refusals, the key (and a superadmin's impersonation target), the rate
# limit, the content negotiation, and the edge's refusal of NUL or lone surrogates in the path or the query string.
# And a database that is unreachable or cancels a statement (loopmem.http.error_responses): 503 with a stable code.
EVERY_OPERATION: tuple[ErrorSpec, ...] = (
    *SERVER,
    Unauthorized,
    ImpersonationTenantNotFound,
    RateLimited,
    NOT_ACCEPTABLE,
    InvalidText,
    DatabaseUnavailable,
    DatabaseTimeout,
)
# An operation whose code resolves the caller's scope (tenant and subject) from the key.
SCOPED: tuple[ErrorSpec, ...] = (ImpersonationTenantRequired, SubjectIdUnresolvable)
# An operation that reads a body: over the route's limit (413), or chunked where the server cannot frame it (411:
# gunicorn always can; a server that does not mark where the input ends cannot).
BODY: tuple[ErrorSpec, ...] = (PayloadTooLarge, LengthRequired)
# JSON text from a client (a body, a JSON query parameter, an import line): the edge's depth, text and number checks.
JSON_TEXT: tuple[ErrorSpec, ...] = (InvalidText, TooDeeplyNested, InvalidNumber)
# An operation that reads a JSON body: its size, the parser, the JSON text checks, the object rule.
JSON_BODY: tuple[ErrorSpec, ...] = (
    *BODY,
    BadRequest,
    *JSON_TEXT,
    UNSUPPORTED_MEDIA_TYPE,
    ValidationFailed,
)
# An operation with a JSON query parameter: the JSON text checks, and 422 for text that is not the JSON it takes.
JSON_QUERY: tuple[ErrorSpec, ...] = (*JSON_TEXT, ValidationFailed)
# A write (an unsafe method not exempt from the custody halt).
WRITE: tuple[ErrorSpec, ...] = (TenantHalted,)


def _status_code(error: ErrorSpec) -> tuple[int, str]:
    return error if isinstance(error, tuple) else (error.status, error.code)


def error_schema(codes: Iterable[str]) -> dict[str, Any]:
    """The error envelope whose `code` is one of `codes`: the shared component, narrowed."""
    return {
        "allOf": [
            {"$ref": "#/components/schemas/Error"},
            {
                "type": "object",
                "properties": {
                    "error": {"type": "object", "properties": {"code": {"type": "string", "enum": sorted(codes)}}}
                },
            },
        ]
    }


def responses(
    success: Mapping[int | tuple[int, str], Any],
    *errors: ErrorSpec,
    body: bool = False,
    write: bool = False,
    scoped: bool = True,
) -> dict[int | tuple[int, str], Any]:
    """An operation's responses: its successes, then every error it can give, one response per status.

    `errors` are those its own code raises; `body` adds the JSON-body checks, `write` the custody halt, `scoped`
    the scope resolution; every operation has the key, rate limit and URL checks.
    """
    every = [*EVERY_OPERATION, *(SCOPED if scoped else ()), *(JSON_BODY if body else ()), *(WRITE if write else ())]
    by_status: dict[int, set[str]] = {}
    for error in (*every, *errors):
        status, code = _status_code(error)
        by_status.setdefault(status, set()).add(code)
    result: dict[int | tuple[int, str], Any] = dict(success)
    for status in sorted(by_status):
        codes = sorted(by_status[status])
        result[status] = OpenApiResponse(
            response=error_schema(codes), description=", ".join(f"`{code}`" for code in codes)
        )
    return result


ERROR_COMPONENT: dict[str, Any] = {
    "type": "object",
    "description": 'Every non-2xx body: `{"error": {"status", "code", "message", "details"}}`.',
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "status": {"type": "integer", "description": "the HTTP status, repeated"},
                "code": {"type": "string", "description": "stable: a code never changes once shipped"},
                "message": {"type": "string", "description": "for people; may change"},
                "details": {
                    "type": "object",
                    "additionalProperties": {},
                    "description": "field → messages for validation errors, else the code's own facts",
                },
            },
            "required": ["status", "code", "message", "details"],
        }
    },
    "required": ["error"],
}


def error_component(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular post-processing hook: the shared `Error` component every error response points at."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_COMPONENT
    return result


# --- What drf-spectacular cannot say by itself ---------------------------------------------------------------

# Markers an operation or a parameter carries until `precise_requests` turns them into OpenAPI.
_BODY_REQUIRED = "x-loopmem-body-required"
_JSON_CONTENT = "x-loopmem-json-content"
BODY_REQUIRED = {_BODY_REQUIRED: True}


def json_query_parameter(name: str, schema: dict[str, Any], *, description: str) -> OpenApiParameter:
    """A query parameter whose value is JSON text (`?metadata={"lang":"py"}`): OpenAPI says so with
    `content: {application/json: {schema}}`, which drf-spectacular cannot write; `precise_requests` does."""
    return OpenApiParameter(name, schema, description=description, extensions={_JSON_CONTENT: True})


def precise_requests(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular post-processing hook: a body the operation cannot do without is `required` (a body whose
    fields are all optional one by one may still need one of them), a JSON-text query parameter is described by
    its `content` (the schema of the parsed JSON) rather than as a plain string, everything a client sends states
    the edge's text rule (`text_rule`), and the API's description says what every request is refused for."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if operation.pop(_BODY_REQUIRED, False) and "requestBody" in operation:
                operation["requestBody"]["required"] = True
            for parameter in operation.get("parameters", []):
                if parameter.pop(_JSON_CONTENT, False):
                    parameter["content"] = {"application/json": {"schema": parameter.pop("schema")}}
    result = text_rule(result)
    info = result.setdefault("info", {})
    info["description"] = "\n\n".join(filter(None, (info.get("description"), TEXT_RULE, SERVER_RULE)))
    return result


# --- The edge's text rule, stated on every request ---------------------------------------------------------------

TEXT_RULE = (
    "No text a client sends may hold a NUL character (U+0000) or a lone UTF-16 surrogate (a `\\ud800`-style escape "
    "with no partner in JSON): not the path, the query string, a JSON key or value at any depth, nor a JSON query "
    "parameter. Either is 400 `invalid_text`. Every string a request takes carries a `pattern` refusing NUL, and "
    "every object states its keys with `patternProperties` (a JSON Schema keyword OpenAPI 3.0 does not list, "
    "kept because nothing it does list can say what a key may hold); no pattern names the surrogates, which are "
    "not Unicode text. JSON numbers must be finite doubles: NaN, Infinity or a literal that overflows a double "
    "(1e400) is 422 `invalid_number`."
)
SERVER_RULE = (
    "Before any of the API's code runs, the HTTP server refuses a request line over 4094 bytes (414 `uri_too_long`), "
    "more than 100 headers or one over 8190 bytes (431 `header_fields_too_large`) and a malformed request line or "
    "header (400 `bad_request`), in the same error envelope; every operation lists these answers."
)
_JSON_VALUE_REF = {"$ref": "#/components/schemas/JsonValue"}
# Any JSON a client may send where a field takes any JSON (metadata, a batch item, a lenient number or a flag): the
# text rule at every depth, keys included. Recursive: schemathesis and every JSON Schema validator follow it.
JSON_VALUE: dict[str, Any] = {
    "description": "Any JSON value, under the text rule at every depth: no NUL in a string or a key (400 "
    "`invalid_text`); numbers finite doubles (422 `invalid_number`); nested at most 32 deep (400 `too_deeply_nested`).",
    "anyOf": [
        # null too: OpenAPI 3.0 has no null type, only `nullable` on a typed schema.
        {"type": "string", "pattern": TEXT_PATTERN, "nullable": True},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "array", "items": _JSON_VALUE_REF},
        {"$ref": "#/components/schemas/JsonObject"},
    ],
}
JSON_OBJECT: dict[str, Any] = {
    "type": "object",
    "description": "A JSON object whose keys hold no NUL and whose values are any JSON under the text rule.",
    "patternProperties": {TEXT_PATTERN: _JSON_VALUE_REF},
    "additionalProperties": False,
}
_COMPOSITIONS = ("anyOf", "oneOf", "allOf")
_REF_PREFIX = "#/components/schemas/"


def text_rule(result: dict[str, Any]) -> dict[str, Any]:
    """State the text rule on every string, key and free-form value a request takes: its parameters (path and
    query; a header's own pattern is printable ASCII) and its bodies, through the components they name.

    A string with a `pattern`, an `enum` or a `format` keeps it: each states its own text, and every pattern of
    this project refuses NUL (tests/schema/test_text_rule.py checks each one). Any other string gets
    `TEXT_PATTERN`; a value that may be any JSON becomes `JsonValue`; an object that takes other keys than the
    ones it names takes them as `patternProperties` under `TEXT_PATTERN`, the rest refused.
    """
    # A copy: the schemas below are edited in place, and some are this project's constants, shared by reference.
    result = copy.deepcopy(result)
    components = result.setdefault("components", {}).setdefault("schemas", {})
    components["JsonValue"] = copy.deepcopy(JSON_VALUE)
    components["JsonObject"] = copy.deepcopy(JSON_OBJECT)
    done = {"JsonValue", "JsonObject"}
    for schema in _request_schemas(result):
        _state_text_rule(schema, components, done)
    return result


def _request_schemas(result: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The schema of every path and query parameter and of every request body."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter.get("in") in ("path", "query"):
                    yield from _schemas_of(parameter)
            yield from _schemas_of(operation.get("requestBody", {}))


def _schemas_of(holder: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if "schema" in holder:
        yield holder["schema"]
    for media in holder.get("content", {}).values():
        if "schema" in media:
            yield media["schema"]


def _state_text_rule(schema: Any, components: dict[str, Any], done: set[str]) -> None:
    """`text_rule` on one schema, in place, and on every component it names that is not `done` yet."""
    if not isinstance(schema, dict):
        return
    if "$ref" in schema:
        name = schema["$ref"].removeprefix(_REF_PREFIX)
        if name not in done:
            done.add(name)
            _state_text_rule(components.get(name), components, done)
        return
    for keyword in _COMPOSITIONS:
        for branch in schema.get(keyword, []):
            _state_text_rule(branch, components, done)
    kind = schema.get("type")
    if kind == "string":
        if not {"pattern", "enum", "format"} & set(schema):
            schema["pattern"] = TEXT_PATTERN
    elif kind == "array":
        schema["items"] = _any_json_as_value(schema.get("items", {}))
        _state_text_rule(schema["items"], components, done)
    elif kind == "object" or "properties" in schema:
        for field in schema.get("properties", {}).values():
            _state_text_rule(field, components, done)
        others = schema.get("additionalProperties", True)
        if others is not False:
            others = _any_json_as_value({} if others is True else others)
            _state_text_rule(others, components, done)
            schema["patternProperties"] = {TEXT_PATTERN: others}
            schema["additionalProperties"] = False
    elif kind is None and not {"enum", *_COMPOSITIONS} & set(schema):
        # No type: the field takes any JSON (a lenient number, a flag); its description stays beside the rule.
        schema["allOf"] = [_JSON_VALUE_REF]


def _any_json_as_value(schema: Any) -> Any:
    """`{}` (any JSON) as the `JsonValue` it really is."""
    return dict(_JSON_VALUE_REF) if schema == {} else schema


# --- Envelopes ----------------------------------------------------------------------------------------------

OUTCOME_CHOICES = ["success", "empty", "degraded", "fallback", "error"]
# `meta.outcome` of every memory and knowledge read (reference §2.0).
OUTCOME = serializers.ChoiceField(choices=OUTCOME_CHOICES)

FLAG_PARAMETER = 'A flag: only "true" turns it on; any other value, or absent, is off.'


_WRITE_META = inline_serializer(
    "WriteMeta",
    {
        "redacted": serializers.DictField(
            required=False, help_text="{kinds, spans}: present only when the tenant's secret policy redacted the write"
        )
    },
)


def data_envelope(name: str, data: Any, *, write: bool = False) -> Any:
    """`{data}` (and, on a write, `meta.redacted` when the secret policy redacted something)."""
    fields: dict[str, Any] = {"data": data}
    if write:
        fields["meta"] = _WRITE_META.__class__(required=False)
    return inline_serializer(name, fields)


def _page_meta(name: str, *, outcome: bool) -> Any:
    meta: dict[str, Any] = {
        "total_count": serializers.IntegerField(min_value=0),
        "limit": serializers.IntegerField(min_value=1),
        "offset": serializers.IntegerField(min_value=0),
    }
    if outcome:
        meta["outcome"] = serializers.ChoiceField(choices=OUTCOME_CHOICES)
    return inline_serializer(name, meta)


_PAGE_META = {True: _page_meta("PageMeta", outcome=True), False: _page_meta("ProjectPageMeta", outcome=False)}


def page(name: str, item: serializers.Serializer, *, outcome: bool = True) -> Any:  # type: ignore[type-arg]
    """`{data: [item], meta: {total_count, limit, offset[, outcome]}}`: every list (projects' carry no outcome)."""
    return inline_serializer(name, {"data": item.__class__(many=True), "meta": _PAGE_META[outcome].__class__()})


def project_id_parameter(description: str) -> OpenApiParameter:
    """`?project_id=`: a canonical UUID (422 `invalid_project_id` otherwise), blank is global."""
    return OpenApiParameter("project_id", PROJECT_ID_SCHEMA, description=description)


# A row's id in a path: anything but a canonical UUID (surrounding spaces allowed) is the same 404 as an id that
# is not there, so the schema states the UUID rule and a request breaking it expects the 404.
ROW_ID = OpenApiParameter(
    "id",
    {"type": "string", "pattern": rf"^\s*{CANONICAL_UUID_PATTERN}\s*$"},
    location=OpenApiParameter.PATH,
    description="a canonical UUID; anything else is 404, like an id that is not there",
)

PAGE_PARAMETERS = [
    OpenApiParameter(
        "limit",
        str,
        description=f"an integer, clamped to 1..{MAX_PAGE_LIMIT}; read leniently (a leading integer; anything "
        f"else is {DEFAULT_PAGE_LIMIT})",
    ),
    OpenApiParameter(
        "offset", str, description="an integer ≥ 0; read leniently (a leading integer; anything else is 0)"
    ),
]
