"""Each error code the foundation can answer, with its whole body."""

from __future__ import annotations

import pytest

from projects import selectors
from tests.conftest import error


def test_malformed_json_is_400_bad_request(client_for, user_key):
    response = client_for(user_key).post("/api/v1/projects", data="{not json", content_type="application/json")
    assert response.status_code == 400
    body = response.json()
    assert body["error"]["code"] == "bad_request"
    assert body["error"]["status"] == 400
    assert body["error"]["message"].startswith("Malformed request body: JSON parse error")
    assert body["error"]["details"] == {}


def test_unknown_url_is_404_not_found(client_for, user_key):
    response = client_for(user_key).get("/api/v1/nothing-here")
    assert response.status_code == 404
    assert response.json() == error(404, "not_found", "Not found")


def test_validation_errors_are_422_with_field_details(client_for, user_key):
    response = client_for(user_key).post("/api/v1/projects", {"slug": "x"}, format="json")
    assert response.status_code == 422
    assert response.json() == error(
        422, "validation_failed", "Validation failed", {"name": ["This field is required."]}
    )


def test_wrong_method_is_405(client_for, user_key):
    response = client_for(user_key).delete("/api/v1/projects")
    assert response.status_code == 405
    assert response.json() == error(405, "method_not_allowed", 'Method "DELETE" not allowed.')


def test_unsupported_media_type_is_415(client_for, user_key):
    response = client_for(user_key).post("/api/v1/projects", data="name=x", content_type="text/plain")
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"


@pytest.mark.django_db
def test_unexpected_exceptions_are_500_server_error_and_logged(client_for, user_key, monkeypatch, caplog):
    def explode(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(selectors, "project_list", explode)
    response = client_for(user_key).get("/api/v1/projects")
    assert response.status_code == 500
    assert response.json() == error(500, "server_error", "Internal server error")
    assert "RuntimeError: boom" in caplog.text
