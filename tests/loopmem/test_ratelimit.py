"""Per-key and per-tenant limits on the real Redis, their headers, and failing open without Redis."""

from __future__ import annotations

import pytest
from django.test import override_settings

from tests.conftest import error
from tests.factories import TenantFactory


@pytest.fixture
def small_tenant(db):
    return TenantFactory.create(slug="small", rate_limit_requests_per_minute=3)


def test_authenticated_responses_carry_rate_limit_headers(client_for, agent_key):
    response = client_for(agent_key).get("/api/v1/projects")
    assert response["x-ratelimit-limit"] == "300"
    assert response["x-ratelimit-remaining"] == "299"
    assert 0 <= int(response["x-ratelimit-reset"]) <= 60


def test_error_responses_of_counted_requests_carry_the_headers_too(client_for, agent_key):
    response = client_for(agent_key).get("/api/v1/projects/resolve")
    assert response.status_code == 422
    assert response["x-ratelimit-remaining"] == "299"


def test_the_key_limit_answers_a_real_429(client_for, make_key, small_tenant):
    client = client_for(make_key("user", small_tenant))
    remaining = [client.get("/api/v1/projects")["x-ratelimit-remaining"] for _ in range(3)]
    assert remaining == ["2", "1", "0"]
    response = client.get("/api/v1/projects")
    assert response.status_code == 429
    retry_after = int(response["retry-after"])
    assert 1 <= retry_after <= 60
    assert response.json() == error(
        429, "rate_limited", "Rate limit exceeded", {"retry_after": retry_after, "limit": 3}
    )
    assert response["x-ratelimit-remaining"] == "0"


def test_keys_are_counted_separately(client_for, make_key, small_tenant):
    first, second = client_for(make_key("user", small_tenant)), client_for(make_key("user", small_tenant))
    for _ in range(3):
        assert first.get("/api/v1/projects").status_code == 200
    assert first.get("/api/v1/projects").status_code == 429
    assert second.get("/api/v1/projects").status_code == 200


def test_the_tenant_aggregate_is_three_times_the_key_limit(client_for, make_key, small_tenant):
    clients = [client_for(make_key("user", small_tenant)) for _ in range(4)]
    statuses = [client.get("/api/v1/projects").status_code for client in clients for _ in range(3)]
    # 12 requests, each key within its own 3: the tenant's 9 are used by the first three keys.
    assert statuses == [200] * 9 + [429] * 3


def test_superadmin_is_exempt(client_for, superadmin_key, small_tenant):
    client = client_for(superadmin_key, impersonate="small")
    responses = [client.get("/api/v1/projects") for _ in range(12)]
    assert {r.status_code for r in responses} == {200}
    assert "x-ratelimit-limit" not in responses[-1]


def test_the_limiter_fails_open_when_redis_is_unreachable(client_for, make_key, small_tenant, tmp_path, caplog):
    client = client_for(make_key("user", small_tenant))
    dead = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"unix://{tmp_path}/nothing-here.sock",
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
        }
    }
    with override_settings(CACHES=dead):
        statuses = [client.get("/api/v1/projects").status_code for _ in range(5)]
    assert statuses == [200] * 5
    assert "rate limiter failing open" in caplog.text
