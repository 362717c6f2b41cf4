"""Every way a request can fail authentication answers 401 `unauthorized` with the full envelope."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import DatabaseError, connection
from django.http import HttpResponse
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from loopmem.models import ApiKey
from loopmem.runtime import after_response
from loopmem.runtime.after_response import AfterResponseMiddleware
from loopmem.tenancy.principal import principal_for_key
from loopmem.tenancy.services import api_key_revoke
from tests.conftest import error

UNAUTHORIZED_BAD_KEY = error(401, "unauthorized", "The API key is missing, unknown, revoked or expired")


@pytest.mark.django_db
def test_missing_authorization_header_is_401(client_for):
    response = client_for().get("/api/v1/projects")
    assert response.status_code == 401
    assert response.json() == error(
        401, "unauthorized", "A valid API key is required: send 'Authorization: Bearer <key>'"
    )
    assert response["WWW-Authenticate"] == 'Bearer realm="loopmem"'


@pytest.mark.django_db
@pytest.mark.parametrize("header", ["Basic abc", "Bearer", "Bearer   ", "Token lm_x"])
def test_malformed_authorization_header_is_401(client_for, header):
    client = client_for()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/v1/projects")
    assert response.status_code == 401
    assert response.json() == error(401, "unauthorized", "The Authorization header must be 'Bearer <key>'")


@pytest.mark.django_db
def test_unknown_key_is_401(client_for, agent_key):
    client = client_for()
    client.credentials(HTTP_AUTHORIZATION="Bearer lm_not-a-real-key")
    response = client.get("/api/v1/projects")
    assert response.status_code == 401
    assert response.json() == UNAUTHORIZED_BAD_KEY


def test_revoked_key_is_401(client_for, agent_key):
    api_key_revoke(key_id=str(agent_key.api_key.id))
    response = client_for(agent_key).get("/api/v1/projects")
    assert response.status_code == 401
    assert response.json() == UNAUTHORIZED_BAD_KEY


def test_expired_key_is_401(client_for, agent_key):
    ApiKey.objects.filter(id=agent_key.api_key.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = client_for(agent_key).get("/api/v1/projects")
    assert response.status_code == 401
    assert response.json() == UNAUTHORIZED_BAD_KEY


def test_key_not_yet_expired_is_accepted(client_for, make_key, tenant):
    issued = make_key("user", tenant, expires_in_seconds=3600)
    assert client_for(issued).get("/api/v1/projects").status_code == 200


def test_successful_request_records_last_used_at(client_for, agent_key):
    assert agent_key.api_key.last_used_at is None
    assert client_for(agent_key).get("/api/v1/projects").status_code == 200
    agent_key.api_key.refresh_from_db()
    first = agent_key.api_key.last_used_at
    assert first is not None
    # Within the resolution window the column is not rewritten (auth stays a read).
    client_for(agent_key).get("/api/v1/projects")
    agent_key.api_key.refresh_from_db()
    assert agent_key.api_key.last_used_at == first


@pytest.mark.django_db
def test_a_keys_last_use_is_written_after_the_response_not_before(agent_key):
    seen_while_answering = []

    def view(request):
        principal_for_key(raw_key=agent_key.raw_key, impersonate=None)
        seen_while_answering.append(ApiKey.objects.get(id=agent_key.api_key.id).last_used_at)
        return HttpResponse()

    AfterResponseMiddleware(view)(RequestFactory().get("/api/v1/projects"))
    assert seen_while_answering == [None]
    after_response.flush()  # what the response's close (request_finished) runs once the client has its answer
    agent_key.api_key.refresh_from_db()
    assert agent_key.api_key.last_used_at is not None


@pytest.mark.django_db(transaction=True)
def test_a_keys_last_use_commits_without_waiting_for_the_disk(agent_key):
    with CaptureQueriesContext(connection) as captured:
        principal_for_key(raw_key=agent_key.raw_key, impersonate=None)  # outside a request: written at once
    statements = [query["sql"] for query in captured.captured_queries]
    relaxed = statements.index("SET LOCAL synchronous_commit TO off")
    assert statements[relaxed + 1].startswith("UPDATE")
    agent_key.api_key.refresh_from_db()
    assert agent_key.api_key.last_used_at is not None


@pytest.mark.django_db
def test_a_failed_last_use_write_is_logged_not_raised(agent_key, monkeypatch, caplog):
    def refuse(*args, **kwargs):
        raise DatabaseError("disk full")

    monkeypatch.setattr(ApiKey.objects, "filter", refuse)
    principal = principal_for_key(raw_key=agent_key.raw_key, impersonate=None)
    assert principal.api_key.id == agent_key.api_key.id
    assert "last use failed" in caplog.text
