"""/healthz and /readyz: no auth; readiness names the dependency that failed."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings


@pytest.mark.django_db
def test_healthz(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_when_database_and_redis_answer(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "checks": {"database": "ok", "redis": "ok"}}


@pytest.mark.django_db
def test_readyz_is_503_when_redis_is_unreachable(client, tmp_path):
    with override_settings(REDIS_URL=f"unix://{tmp_path}/none.sock"):
        response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()["error"]
    assert (body["status"], body["code"]) == (503, "not_ready")
    assert body["details"]["checks"]["database"] == "ok"
    assert body["details"]["checks"]["redis"].startswith("error:")


@pytest.mark.django_db
def test_openapi_schema_and_docs_are_served(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert "/api/v1/projects" in paths
    assert "/api/v1/projects/resolve" in paths
    assert client.get("/api/docs/").status_code == 200


@pytest.mark.django_db
def test_the_api_docs_load_swagger_ui_from_the_service_itself_not_a_cdn(client):
    page = client.get("/api/docs/").content.decode()
    assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', page)
    assert any(a.endswith("swagger-ui-bundle.js") for a in assets), page
    assert "cdn" not in page.lower()
    for asset in assets:
        response = client.get(asset)
        assert response.status_code == 200, asset
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert body, asset
