"""The served schema states what every request may hold (loopmem.http.openapi.text_rule) and every refusal it can get:
each string a client sends refuses NUL, each object says what its keys may hold, any-JSON values are `JsonValue`,
and every operation lists the HTTP server's own refusals."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import jsonschema_rs
import pytest

from loopmem.params import TEXT_PATTERN

pytestmark = pytest.mark.django_db

# Strings to try each pattern on: at least one must match it, and none may once a NUL is put in.
PROBES = ["", "0", "a", " a ", "a,b", "true", "9b0c2e14-eac4-a1ca-ef69-93d874ba22fd", "x" * 300]


@pytest.fixture(scope="module")
def schema(django_db_blocker: Any) -> dict[str, Any]:
    from django.test import Client

    with django_db_blocker.unblock():
        response = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return dict(response.json())


def request_schemas(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, schema) for every schema a request takes, through the components it names, each once."""
    components = schema["components"]["schemas"]
    seen: set[str] = set()
    stack: list[tuple[str, Any]] = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            for parameter in operation.get("parameters", []):
                if parameter["in"] in ("path", "query"):
                    for media in parameter.get("content", {}).values():
                        stack.append((f"{where} ?{parameter['name']}", media["schema"]))
                    if "schema" in parameter:
                        stack.append((f"{where} {parameter['in']} {parameter['name']}", parameter["schema"]))
            for media in operation.get("requestBody", {}).get("content", {}).values():
                stack.append((f"{where} body", media["schema"]))
    while stack:
        where, node = stack.pop()
        if not isinstance(node, dict):
            continue
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[1]
            if name not in seen:
                seen.add(name)
                stack.append((name, components[name]))
            continue
        yield where, node
        for keyword in ("anyOf", "oneOf", "allOf"):
            stack.extend((where, branch) for branch in node.get(keyword, []))
        stack.extend((f"{where}.{name}", field) for name, field in node.get("properties", {}).items())
        stack.extend((f"{where}[*]", value) for value in node.get("patternProperties", {}).values())
        for keyword in ("items", "additionalProperties"):
            if isinstance(node.get(keyword), dict):
                stack.append((f"{where}[{keyword}]", node[keyword]))


def test_every_string_a_request_takes_refuses_nul(schema):
    unstated = [
        where
        for where, node in request_schemas(schema)
        if node.get("type") == "string" and not {"pattern", "enum", "format"} & set(node)
    ]
    assert unstated == []


def test_every_pattern_a_request_takes_refuses_nul_and_compiles_where_schemathesis_reads_it(schema):
    patterns = {node["pattern"] for _, node in request_schemas(schema) if "pattern" in node}
    patterns |= {key for _, node in request_schemas(schema) for key in node.get("patternProperties", {})}
    assert TEXT_PATTERN in patterns
    for pattern in patterns:
        jsonschema_rs.validator_for({"type": "string", "pattern": pattern})  # Rust's engine: no error
        matching = [probe for probe in PROBES if re.search(pattern, probe)]
        assert matching, f"no probe matches {pattern!r}: add one"
        with_nul = [p for probe in matching for p in ("\x00" + probe, probe + "\x00", f"{probe[:1]}\x00{probe[1:]}")]
        assert [p for p in with_nul if re.search(pattern, p)] == [], pattern


def test_every_object_a_request_takes_says_what_its_keys_may_hold(schema):
    # Named keys only, or other keys under `patternProperties` (no NUL): never keys of any text.
    open_objects = [
        where
        for where, node in request_schemas(schema)
        if (node.get("type") == "object" or "properties" in node) and node.get("additionalProperties") is not False
    ]
    assert open_objects == []
    for where, node in request_schemas(schema):
        assert set(node.get("patternProperties", {})) <= {TEXT_PATTERN}, where


def test_a_value_that_may_be_any_json_is_a_json_value(schema):
    untyped = [
        where
        for where, node in request_schemas(schema)
        if not {"type", "$ref", "enum", "anyOf", "oneOf", "allOf"} & set(node)
    ]
    assert untyped == []
    flag = schema["components"]["schemas"]["ErasureIn"]["properties"]["dry_run"]
    assert flag["allOf"] == [{"$ref": "#/components/schemas/JsonValue"}]


def test_the_json_value_holds_no_nul_at_any_depth(schema):
    components = schema["components"]["schemas"]
    json_value = {
        **_draft4(components["JsonValue"]),
        "definitions": {name: _draft4(components[name]) for name in ("JsonValue", "JsonObject")},
    }
    validator = jsonschema_rs.Draft4Validator(json_value)
    assert validator.is_valid({"a": [1, "x", None, True, {"b": {"c": ""}}]})
    assert not validator.is_valid({"a": [{"b": "x\x00"}]})
    assert not validator.is_valid({"a": {"b\x00": 1}})
    assert not validator.is_valid(["\x00"])


def _draft4(node: Any) -> Any:
    """An OpenAPI 3.0 schema as draft 4 reads it: refs into `definitions`, `nullable` as a null alternative."""
    if isinstance(node, list):
        return [_draft4(item) for item in node]
    if not isinstance(node, dict):
        return node
    result = {key: _draft4(value) for key, value in node.items() if key != "nullable"}
    if "$ref" in result:
        result["$ref"] = result["$ref"].replace("#/components/schemas/", "#/definitions/")
    if node.get("nullable") and "type" in node:
        result["type"] = [node["type"], "null"]
    return result


def test_every_operation_lists_the_http_servers_refusals_in_the_error_envelope(schema):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            for status, code in (("400", "bad_request"), ("414", "uri_too_long"), ("431", "header_fields_too_large")):
                envelope = responses[status]["content"]["application/json"]["schema"]["allOf"]
                assert envelope[0] == {"$ref": "#/components/schemas/Error"}, (method, path)
                assert code in envelope[1]["properties"]["error"]["properties"]["code"]["enum"], (method, path, status)


def test_every_operation_taking_a_body_lists_its_size_framing_and_number_refusals(schema):
    taking = [(path, op) for path, ops in schema["paths"].items() for op in ops.values() if "requestBody" in op]
    assert taking
    for path, operation in taking:
        responses = operation["responses"]
        assert _codes(responses, "411") == ["length_required"], path
        assert _codes(responses, "413") == ["payload_too_large"], path
        assert "invalid_number" in _codes(responses, "422"), path
        assert {"invalid_text", "too_deeply_nested"} <= set(_codes(responses, "400")), path


def test_the_json_query_parameter_lists_the_json_text_refusals(schema):
    listing = schema["paths"]["/api/v1/memory"]["get"]["responses"]
    assert {"invalid_number", "validation_failed"} <= set(_codes(listing, "422"))
    assert {"invalid_text", "too_deeply_nested"} <= set(_codes(listing, "400"))


def test_the_description_says_what_is_refused_everywhere(schema):
    description = schema["info"]["description"]
    for words in ("NUL", "lone UTF-16 surrogate", "invalid_text", "invalid_number", "uri_too_long"):
        assert words in description


def _codes(responses: dict[str, Any], status: str) -> list[str]:
    narrowed = responses[status]["content"]["application/json"]["schema"]["allOf"][1]
    return list(narrowed["properties"]["error"]["properties"]["code"]["enum"])
