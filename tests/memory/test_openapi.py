"""The OpenAPI schema describes every memory route beyond the reference's, with its fields and error codes."""

from __future__ import annotations

import pytest

from loopmem.http.inputs import TagsField
from loopmem.params import NOT_BLANK_PATTERN

pytestmark = pytest.mark.django_db

FILTERS = {
    "tags",
    "tags_any",
    "metadata",
    "source",
    "created_after",
    "created_before",
    "min_confidence",
    "occurred_after",
    "occurred_before",
}


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    from django.test import Client

    with django_db_blocker.unblock():
        response = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def _body(schema, operation, content_type="application/json"):
    body = operation["requestBody"]["content"][content_type]["schema"]
    if "$ref" not in body:
        return body  # an inline schema (a correction's: at least one field, no other)
    return schema["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]


def test_one_memory_get_correct_and_forget(schema):
    item = schema["paths"]["/api/v1/memory/{id}"]
    assert {"get", "patch", "delete"} <= set(item)
    assert "put" not in item
    patch = item["patch"]
    assert set(_body(schema, patch)["properties"]) == {"text", "confidence", "tags", "metadata"}
    assert {"200", "404", "409", "422"} <= set(patch["responses"])
    assert "already_superseded" in patch["responses"]["409"]["description"]
    assert "200" in schema["paths"]["/api/v1/memory/{id}/history"]["get"]["responses"]


def test_batch_export_and_import(schema):
    batch = schema["paths"]["/api/v1/memory/batch"]["post"]
    assert "memories" in _body(schema, batch)["properties"]
    export = schema["paths"]["/api/v1/memory/export"]["get"]
    assert "application/x-ndjson" in export["responses"]["200"]["content"]
    assert "include_superseded" in {p["name"] for p in export["parameters"]}
    imported = schema["paths"]["/api/v1/memory/import"]["post"]
    assert {"application/x-ndjson", "application/json"} <= set(imported["requestBody"]["content"])
    assert {"200", "413", "422"} <= set(imported["responses"])


def test_the_filters_on_recall_merged_recall_and_list(schema):
    recall = schema["paths"]["/api/v1/memory/recall"]["post"]
    assert FILTERS | {"query", "limit", "include_superseded", "project_id"} <= set(_body(schema, recall)["properties"])
    merged = schema["paths"]["/api/v1/recall"]["post"]
    assert FILTERS | {"query", "session_id"} <= set(_body(schema, merged)["properties"])
    listing = schema["paths"]["/api/v1/memory"]["get"]
    assert {p["name"] for p in listing["parameters"]} >= FILTERS


def test_lists_are_envelopes_and_every_error_is_the_error_component(schema):
    listing = schema["paths"]["/api/v1/memory"]["get"]["responses"]
    page = listing["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert set(schema["components"]["schemas"][page]["properties"]) == {"data", "meta"}
    forget = schema["paths"]["/api/v1/memory/{id}"]["delete"]["responses"]
    assert "200" in forget
    assert "204" not in forget
    error = forget["404"]["content"]["application/json"]["schema"]["allOf"]
    assert error[0] == {"$ref": "#/components/schemas/Error"}
    assert error[1]["properties"]["error"]["properties"]["code"]["enum"] == ["not_found"]
    assert {"401", "429"} <= set(forget)


def _component(schema, name):
    return schema["components"]["schemas"][name]


def test_memory_text_and_turn_content_are_not_blank_on_every_write(schema):
    patch = _body(schema, schema["paths"]["/api/v1/memory/{id}"]["patch"])
    imported = schema["paths"]["/api/v1/memory/import"]["post"]["requestBody"]["content"]["application/json"]
    line = _component(schema, imported["schema"]["items"]["$ref"].rsplit("/", 1)[1])
    texts = [
        _component(schema, "LongTermBodyIn")["properties"]["text"],
        _component(schema, "SessionTurnBodyIn")["properties"]["content"],
        line["properties"]["text"],
        patch["properties"]["text"],
    ]
    for text in texts:
        assert text["pattern"] == NOT_BLANK_PATTERN
        assert "not blank" in text["description"]


def test_a_correction_takes_tags_under_remembers_caps(schema):
    tags = TagsField()
    patch = _body(schema, schema["paths"]["/api/v1/memory/{id}"]["patch"])["properties"]["tags"]
    remember = _component(schema, "LongTermBodyIn")["properties"]["tags"]
    assert patch["maxItems"] == remember["maxItems"] == tags.max_length
    assert patch["items"]["maxLength"] == remember["items"]["maxLength"] == tags.child.max_length  # type: ignore[attr-defined]
    assert patch["items"]["type"] == "string"


def test_the_import_lists_the_edges_refusals_of_its_body(schema):
    responses = schema["paths"]["/api/v1/memory/import"]["post"]["responses"]
    assert {"411", "413"} <= set(responses)
    assert "invalid_number" in responses["422"]["description"]
    assert "415" not in responses
