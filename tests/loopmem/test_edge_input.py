"""Hostile input answers 4xx with a stable code, never 500: oversized bodies, NUL characters and lone surrogates
wherever text enters, deep nesting, timestamps outside the calendar, numbers where text is expected, tag floods."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.test import override_settings

from knowledge.models import Article
from loopmem.errors import PayloadTooLarge
from loopmem.http.edge import StrictJSONParser
from memory.models import Memory, SessionTurn
from tests.conftest import error

pytestmark = pytest.mark.django_db

LIMIT = 1024 * 1024
TOO_LARGE = error(
    413, "payload_too_large", "The request body is larger than this endpoint accepts", {"max_bytes": LIMIT}
)
TOO_DEEP = error(400, "too_deeply_nested", "The JSON body is nested too deeply", {"max_depth": 32})
INVALID_TEXT = "Text may not contain NUL characters or lone UTF-16 surrogates"


def invalid_text(field: str) -> dict[str, Any]:
    return error(400, "invalid_text", INVALID_TEXT, {"field": field})


def post_raw(client: Any, path: str, raw: str) -> Any:
    return client.generic("POST", path, raw.encode("utf-8", "surrogatepass"), content_type="application/json")


@pytest.mark.parametrize("path", ["/api/v1/memory", "/api/v1/memory/recall", "/api/v1/recall"])
def test_a_10_mb_body_is_refused_before_it_is_parsed(agent, path):
    body = json.dumps({"text": "x" * (10 * 1024 * 1024), "query": "x"})
    response = post_raw(agent, path, body)
    assert (response.status_code, response.json()) == (413, TOO_LARGE)


def test_a_5_mb_metadata_is_refused(agent):
    response = post_raw(agent, "/api/v1/memory", json.dumps({"text": "x", "metadata": {"blob": "y" * 5_000_000}}))
    assert (response.status_code, response.json()) == (413, TOO_LARGE)
    assert not Memory.objects.exists()


@override_settings(MAX_REQUEST_BODY_BYTES=100)
def test_the_limit_is_a_setting(agent):
    response = post_raw(agent, "/api/v1/memory", json.dumps({"text": "x" * 200}))
    assert (response.status_code, response.json()["error"]["details"]) == (413, {"max_bytes": 100})


@override_settings(MAX_REQUEST_BODY_BYTES=100)
def test_the_parser_cuts_a_body_longer_than_it_declared():
    # A lying or missing Content-Length passes the middleware; the parser reads at most limit + 1 bytes.
    with pytest.raises(PayloadTooLarge):
        StrictJSONParser().parse(io.BytesIO(b'{"text": "' + b"x" * 200 + b'"}'), "application/json", {})


NUL_BODIES = [
    ("/api/v1/memory", {"text": "ok", "metadata": {"k\u0000": "v"}}, "body.metadata"),
    ("/api/v1/memory", {"text": "ok", "metadata": {"k": "v\u0000"}}, "body.metadata.k"),
    ("/api/v1/memory", {"text": "a\u0000b"}, "body.text"),
    (
        "/api/v1/memory",
        {"tier": "session", "session_id": "s", "role": "user", "content": "c", "metadata": {"k": "\u0000"}},
        "body.metadata.k",
    ),
    ("/api/v1/memory/promote", {"session_id": "s\u0000x"}, "body.session_id"),
    (
        "/api/v1/knowledge/articles",
        {"title": "t", "body": "b", "category": "finding", "metadata": {"\u0000": 1}},
        "body.metadata",
    ),
]


@pytest.mark.parametrize(("path", "body", "field"), NUL_BODIES)
def test_nul_characters_in_a_body_are_refused(agent, path, body, field):
    response = post_raw(agent, path, json.dumps(body))
    assert (response.status_code, response.json()) == (400, invalid_text(field))
    assert not Memory.objects.exists()
    assert not SessionTurn.objects.exists()
    assert not Article.objects.exists()


SURROGATES = [
    ("/api/v1/memory/recall", '{"query": "\\udfff"}', "body.query"),
    ("/api/v1/recall", '{"query": "\\ud800 x"}', "body.query"),
    ("/api/v1/memory/promote", '{"session_id": "\\udfff"}', "body.session_id"),
    ("/api/v1/memory", '{"text": "ok", "metadata": {"k": "\\udfff"}}', "body.metadata.k"),
]


@pytest.mark.parametrize(("path", "raw", "field"), SURROGATES)
def test_lone_surrogates_are_refused(agent, path, raw, field):
    response = post_raw(agent, path, raw)
    assert (response.status_code, response.json()) == (400, invalid_text(field))


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/v1/memory/sessions/s%00x", "path"),
        ("/api/v1/knowledge/search?q=a%00b", "query.q"),
        ("/api/v1/memory?source=%00", "query.source"),
    ],
)
def test_bad_text_in_the_url_is_refused(agent, path, field):
    response = agent.get(path)
    assert response.status_code == 400, response.content
    assert response.json() == invalid_text(field)


@pytest.mark.parametrize(
    "raw",
    [
        "[" * 100_000 + "]" * 100_000,
        json.dumps({"text": "x", "metadata": {}}).replace("{}", "{" + '"a": {' * 5000 + "}" * 5000 + "}"),
    ],
    ids=["100k-deep body", "5k-deep metadata"],
)
def test_deep_nesting_is_refused(agent, raw):
    response = post_raw(agent, "/api/v1/memory", raw)
    assert (response.status_code, response.json()) == (400, TOO_DEEP)


@pytest.mark.parametrize("expires_at", ["0000-01-01T00:00:00Z", "9999-12-31T23:59:59-23:59"])
def test_a_timestamp_outside_the_calendar_is_422(agent, expires_at):
    body = {"tier": "session", "session_id": "s", "role": "user", "content": "c", "expires_at": expires_at}
    response = agent.post("/api/v1/memory", body, format="json")
    assert response.status_code == 422
    message = f"must be an ISO 8601 datetime, got {expires_at!r}"
    assert response.json() == error(422, "validation_failed", "Validation failed", {"expires_at": [message]})


@pytest.mark.parametrize(("field", "value"), [("text", 0), ("text", True), ("source_session_id", 5)])
def test_a_number_is_not_text(agent, field, value):
    body = {"text": "ok", field: value}
    response = agent.post("/api/v1/memory", body, format="json")
    assert response.json() == error(422, "validation_failed", "Validation failed", {field: ["must be a string"]})
    assert not Memory.objects.exists()


def test_tags_are_bounded_in_count_and_length(agent):
    flood = agent.post("/api/v1/memory", {"text": "ok", "tags": [f"t{n}" for n in range(10_000)]}, format="json")
    assert flood.json() == error(
        422, "validation_failed", "Validation failed", {"tags": ["Ensure this field has no more than 64 elements."]}
    )
    long_tag = agent.post("/api/v1/memory", {"text": "ok", "tags": ["x" * 201]}, format="json")
    assert long_tag.status_code == 422
    assert agent.post("/api/v1/memory", {"text": "ok", "tags": ["t"] * 64}, format="json").status_code == 201


INVALID_NUMBER = "JSON numbers must be finite (NaN, Infinity and literals that overflow a double cannot be stored)"


def invalid_number(field: str) -> dict[str, Any]:
    return error(422, "invalid_number", INVALID_NUMBER, {"field": field})


NON_FINITE_BODIES = [
    ("POST", "/api/v1/memory", '{"text": "ok", "metadata": {"k": NaN}}', "body.metadata.k"),
    ("POST", "/api/v1/memory", '{"text": "ok", "metadata": {"k": [1, Infinity]}}', "body.metadata.k[1]"),
    (
        "POST",
        "/api/v1/memory",
        '{"tier": "session", "session_id": "s", "role": "user", "content": "c", "metadata": {"k": -Infinity}}',
        "body.metadata.k",
    ),
    ("POST", "/api/v1/memory", '{"text": "ok", "metadata": {"k": 1e400}}', "body.metadata.k"),
    ("POST", "/api/v1/memory/recall", '{"query": "q", "metadata": {"k": NaN}}', "body.metadata.k"),
    ("POST", "/api/v1/recall", '{"query": "q", "metadata": {"k": -1e400}}', "body.metadata.k"),
    (
        "POST",
        "/api/v1/memory/batch",
        '{"memories": [{"text": "a", "metadata": {"k": NaN}}]}',
        "body.memories[0].metadata.k",
    ),
    (
        "POST",
        "/api/v1/knowledge/articles",
        '{"title": "t", "body": "b", "category": "finding", "metadata": {"k": Infinity}}',
        "body.metadata.k",
    ),
    ("POST", "/api/v1/memory/import", '{"text": "a", "metadata": {"k": 1E+999}}', "line 1.metadata.k"),
]


@pytest.mark.parametrize(("method", "path", "raw", "field"), NON_FINITE_BODIES)
def test_numbers_jsonb_cannot_hold_are_422_and_store_nothing(agent, method, path, raw, field):
    response = agent.generic(method, path, raw.encode(), content_type="application/json")
    assert (response.status_code, response.json()) == (422, invalid_number(field))
    assert not Memory.objects.exists()
    assert not SessionTurn.objects.exists()
    assert not Article.objects.exists()


def test_a_project_with_a_non_finite_number_is_422(client_for, user_key):
    raw = b'{"name": "p", "metadata": {"k": NaN}}'
    response = client_for(user_key).generic("POST", "/api/v1/projects", raw, content_type="application/json")
    assert (response.status_code, response.json()) == (422, invalid_number("body.metadata.k"))


def test_a_correction_with_a_non_finite_number_changes_nothing(agent):
    memory_id = agent.post("/api/v1/memory", {"text": "ok"}, format="json").json()["data"]["id"]
    raw = b'{"metadata": {"k": NaN}}'
    response = agent.generic("PATCH", f"/api/v1/memory/{memory_id}", raw, content_type="application/json")
    assert (response.status_code, response.json()) == (422, invalid_number("body.metadata.k"))
    assert list(Memory.objects.values_list("text", "metadata")) == [("ok", {})]


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ('{"a": "\\u0000"}', invalid_text("query.metadata.a")),
        ('{"\\u0000": 1}', invalid_text("query.metadata")),
        ('{"a": "\\ud800"}', invalid_text("query.metadata.a")),
        ('{"a": NaN}', invalid_number("query.metadata.a")),
        ('{"a": 1e400}', invalid_number("query.metadata.a")),
    ],
)
def test_a_json_query_parameter_follows_the_body_rules(agent, metadata, expected):
    response = agent.get("/api/v1/memory", {"metadata": metadata})
    assert (response.status_code, response.json()) == (expected["error"]["status"], expected)


BLANK = ["", " ", "\t\n", "\u3000", "\u2003\u00a0"]
NOT_BLANK = error(422, "validation_failed", "Validation failed", {"text": ["This field may not be blank."]})


@pytest.mark.parametrize("text", BLANK)
def test_blank_text_is_refused_naming_the_field(agent, text):
    response = agent.post("/api/v1/memory", {"text": text}, format="json")
    assert (response.status_code, response.json()) == (422, NOT_BLANK)
    turn = {"tier": "session", "session_id": "s", "role": "user", "content": text}
    response = agent.post("/api/v1/memory", turn, format="json")
    assert response.status_code == 422
    assert response.json()["error"]["details"] == {"content": ["This field may not be blank."]}
    assert not Memory.objects.exists()
    assert not SessionTurn.objects.exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("text", 123),
        ("text", " \u3000 "),
        ("tags", [0, 1.5]),
        ("tags", [f"t{n}" for n in range(65)]),
        ("tags", ["x" * 201]),
        ("confidence", True),
        ("confidence", 1.5),
        ("metadata", [1]),
    ],
)
def test_a_correction_is_held_to_the_rules_of_a_write(agent, field, value):
    written = agent.post("/api/v1/memory", {"text": "ok", field: value}, format="json")
    memory_id = agent.post("/api/v1/memory", {"text": "ok"}, format="json").json()["data"]["id"]
    corrected = agent.patch(f"/api/v1/memory/{memory_id}", {field: value}, format="json")
    assert written.status_code == corrected.status_code == 422
    assert corrected.json() == written.json()
    assert Memory.objects.count() == 1


def chunked(client: Any, path: str, body: bytes, *, terminated: bool = True) -> Any:
    """`body` as a server hands a chunked request to the app: decoded, ended where the body ends, no
    Content-Length, the chunked header."""
    return client.generic(
        "POST",
        path,
        body,
        content_type="application/json",
        CONTENT_LENGTH="",
        HTTP_TRANSFER_ENCODING="chunked",
        **{"wsgi.input": io.BytesIO(body), "wsgi.input_terminated": terminated},
    )


@pytest.mark.django_db(transaction=True, databases=["default", "heavy_read"])  # recall reads on its own alias
def test_a_chunked_body_is_read_as_if_its_length_were_declared(agent):
    body = json.dumps({"text": "chunks arrive whole", "tags": ["c"]}).encode()
    declared = agent.generic("POST", "/api/v1/memory", body, content_type="application/json")
    streamed = chunked(agent, "/api/v1/memory", body)
    assert declared.status_code == streamed.status_code == 201
    assert streamed.json()["data"]["text"] == declared.json()["data"]["text"] == "chunks arrive whole"
    query = json.dumps({"query": "chunks", "mode": "keyword"}).encode()
    recalled = [
        agent.generic("POST", "/api/v1/memory/recall", query, content_type="application/json").json(),
        chunked(agent, "/api/v1/memory/recall", query).json(),
    ]
    assert [len(answer["data"]) for answer in recalled] == [2, 2]
    assert recalled[0]["data"] == recalled[1]["data"]


def test_a_chunked_body_over_the_limit_is_413(agent):
    body = json.dumps({"text": "x" * (2 * 1024 * 1024)}).encode()
    response = chunked(agent, "/api/v1/memory", body)
    assert (response.status_code, response.json()) == (413, TOO_LARGE)
    assert not Memory.objects.exists()


def test_a_chunked_body_a_server_cannot_frame_is_411(agent):
    response = chunked(agent, "/api/v1/memory", b'{"text": "x"}', terminated=False)
    message = "A chunked body cannot be read by this server; send the body with a Content-Length"
    assert (response.status_code, response.json()) == (411, error(411, "length_required", message))
    assert not Memory.objects.exists()
