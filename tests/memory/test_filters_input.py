"""Malformed recall and list filters: each is a 422 `validation_failed` naming its field (nothing is read)."""

from __future__ import annotations

import pytest

from tests.conftest import error

pytestmark = pytest.mark.django_db


BAD_FILTERS = [
    ({"tags": "a"}, "tags"),
    ({"tags": [["a"]]}, "tags"),
    ({"tags_any": {"a": 1}}, "tags_any"),
    ({"tags_any": [1.5, 2]}, "tags_any"),  # a number is not a tag
    ({"tags": ["x"] * 51}, "tags"),
    ({"metadata": "lang=py"}, "metadata"),
    ({"metadata": [1, 2]}, "metadata"),
    ({"source": "bogus"}, "source"),
    ({"created_after": "yesterday"}, "created_after"),
    ({"created_before": "2025-13-40"}, "created_before"),
    ({"created_after": 5}, "created_after"),
    ({"occurred_after": "last week"}, "occurred_after"),
    ({"occurred_before": 20250101}, "occurred_before"),
    ({"min_confidence": 1.5}, "min_confidence"),
    ({"min_confidence": "high"}, "min_confidence"),
    ({"min_confidence": True}, "min_confidence"),
]


@pytest.mark.parametrize(("wire", "field"), BAD_FILTERS)
@pytest.mark.parametrize("url", ["/api/v1/memory/recall", "/api/v1/recall"])
def test_a_malformed_recall_filter_is_422_naming_the_field(agent, wire, field, url):
    response = agent.post(url, {"query": "deploy", **wire}, format="json")
    body = response.json()
    assert (response.status_code, body["error"]["code"]) == (422, "validation_failed"), body
    assert list(body["error"]["details"]) == [field]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("created_after=yesterday", "created_after"),
        ("metadata=lang", "metadata"),
        ("metadata=%5B1%5D", "metadata"),
        ("min_confidence=x", "min_confidence"),
        ("occurred_before=soon", "occurred_before"),
    ],
)
def test_a_malformed_list_filter_is_422_naming_the_field(agent, query, field):
    response = agent.get(f"/api/v1/memory?{query}")
    assert response.status_code == 422
    assert list(response.json()["error"]["details"]) == [field]


@pytest.mark.django_db(databases=["default", "heavy_read"])
@pytest.mark.parametrize("url", ["/api/v1/memory/recall", "/api/v1/recall"])
def test_a_time_filter_with_an_offset_postgres_cannot_hold_is_read_in_utc_not_a_500(agent, url):
    # Found by schemathesis: +17:16 is a valid ISO 8601 offset, but PostgreSQL refuses past ±15:59 (was a 500).
    response = agent.post(url, {"query": "deploy", "created_after": "2715-06-19T10:22:05+17:16"}, format="json")
    assert response.status_code == 200, response.json()


@pytest.mark.django_db(databases=["default", "heavy_read"])
@pytest.mark.parametrize("bound", ["occurred_after", "occurred_before"])
@pytest.mark.parametrize("value", ["9999-12-31", "0001-01-01", "2715-06-19T10:22:05+17:16"])
def test_an_event_day_filter_at_the_calendars_ends_is_read_not_a_500(agent, bound, value):
    response = agent.post("/api/v1/memory/recall", {"query": "deploy", bound: value}, format="json")
    assert response.status_code == 200, response.json()


def test_a_time_filter_past_the_calendars_end_is_422(agent):
    response = agent.post("/api/v1/memory/recall", {"created_before": "9999-12-31T23:59:59-23:59"}, format="json")
    body = response.json()
    assert (response.status_code, body["error"]["code"]) == (422, "validation_failed"), body
    assert list(body["error"]["details"]) == ["created_before"]


@pytest.mark.parametrize("query", ["tags=" + "," * 60, "&".join(["tags_any="] * 51), "tags=a" + ",,b" * 30])
def test_empty_tag_filter_parts_count_toward_the_bound(agent, query):
    field = query.split("=")[0]
    response = agent.get(f"/api/v1/memory?{query}")
    message = "Ensure this field has no more than 50 elements."
    assert response.json() == error(422, "validation_failed", "Validation failed", {field: [message]})


def test_empty_tag_filter_parts_within_the_bound_narrow_nothing(agent):
    agent.post("/api/v1/memory", {"text": "tagged", "tags": ["a"]}, format="json")
    response = agent.get("/api/v1/memory?tags=a,,&tags=")
    assert [row["text"] for row in response.json()["data"]] == ["tagged"]
