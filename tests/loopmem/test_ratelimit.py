"""Per-key and per-tenant limits on the real Redis, their headers, and failing open without Redis."""

from __future__ import annotations

import socket

import pytest
from django.conf import settings
from django.test import override_settings
from prometheus_client import REGISTRY

from tests.conftest import error
from tests.factories import TenantFactory

# django-ratelimit's clock held still (tests/loopmem/conftest.py).
pytestmark = pytest.mark.usefixtures("clock")


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


def _rejections(limit: str) -> float:
    return REGISTRY.get_sample_value("loopmem_rate_limit_rejections_total", {"limit": limit}) or 0.0


def test_the_tenant_limit_refuses_a_key_within_its_own_and_counts_as_tenant(client_for, make_key, small_tenant):
    for _ in range(3):
        busy = client_for(make_key("user", small_tenant))
        assert [busy.get("/api/v1/projects").status_code for _ in range(3)] == [200] * 3
    before_key, before_tenant = _rejections("key"), _rejections("tenant")
    fresh = client_for(make_key("user", small_tenant))
    response = fresh.get("/api/v1/projects")
    assert response.status_code == 429
    assert response["x-ratelimit-remaining"] == "2"  # the key itself still had room
    assert response.json()["error"]["details"] == {"retry_after": int(response["retry-after"]), "limit": 3}
    assert (_rejections("key") - before_key, _rejections("tenant") - before_tenant) == (0, 1)


def test_a_request_over_both_limits_counts_both(client_for, make_key, small_tenant):
    for _ in range(2):
        busy = client_for(make_key("user", small_tenant))
        assert [busy.get("/api/v1/projects").status_code for _ in range(3)] == [200] * 3
    last = client_for(make_key("user", small_tenant))
    assert [last.get("/api/v1/projects").status_code for _ in range(3)] == [200] * 3
    before_key, before_tenant = _rejections("key"), _rejections("tenant")
    response = last.get("/api/v1/projects")  # the key's 4th (over 3) and the tenant's 10th (over 9)
    assert response.status_code == 429
    assert 1 <= int(response["retry-after"]) <= 60
    assert (_rejections("key") - before_key, _rejections("tenant") - before_tenant) == (1, 1)


def test_the_reset_header_counts_down_the_window_and_the_next_window_starts_over(client_for, agent_key, clock):
    client = client_for(agent_key)
    reset = int(client.get("/api/v1/projects")["x-ratelimit-reset"])
    assert 1 <= reset <= 60
    clock.advance(reset)  # the first moment of the key's next window
    opened = client.get("/api/v1/projects")
    assert (opened["x-ratelimit-remaining"], opened["x-ratelimit-reset"]) == ("299", "60")
    clock.advance(1.5)
    later = client.get("/api/v1/projects")
    assert (later["x-ratelimit-remaining"], later["x-ratelimit-reset"]) == ("298", "59")  # the same window


def test_waiting_retry_after_seconds_is_enough_and_one_less_is_not(client_for, make_key, small_tenant, clock):
    client = client_for(make_key("user", small_tenant))
    assert [client.get("/api/v1/projects").status_code for _ in range(3)] == [200] * 3
    retry_after = int(client.get("/api/v1/projects")["retry-after"])
    clock.advance(retry_after - 1)
    assert client.get("/api/v1/projects").status_code == 429
    clock.advance(1)
    admitted = client.get("/api/v1/projects")
    assert (admitted.status_code, admitted["x-ratelimit-remaining"]) == (200, "2")


def test_a_tenant_refusal_retries_after_the_tenant_window(client_for, make_key, small_tenant, clock):
    for _ in range(3):
        busy = client_for(make_key("user", small_tenant))
        assert [busy.get("/api/v1/projects").status_code for _ in range(3)] == [200] * 3
    fresh = client_for(make_key("user", small_tenant))
    refused = fresh.get("/api/v1/projects")
    assert refused.status_code == 429
    retry_after = int(refused["retry-after"])
    assert 1 <= retry_after <= 60
    clock.advance(retry_after - 1)
    assert fresh.get("/api/v1/projects").status_code == 429
    clock.advance(1)
    assert fresh.get("/api/v1/projects").status_code == 200


def test_the_configured_cache_fails_open_too_and_refuses_nothing(client_for, make_key, small_tenant, tmp_path, caplog):
    client = client_for(make_key("user", small_tenant))
    before = _rejections("key"), _rejections("tenant")
    dead = {"default": {**settings.CACHES["default"], "LOCATION": f"unix://{tmp_path}/nothing-here.sock"}}
    with override_settings(CACHES=dead):
        responses = [client.get("/api/v1/projects") for _ in range(5)]
    assert [r.status_code for r in responses] == [200] * 5
    assert all("x-ratelimit-limit" not in r for r in responses)
    assert (_rejections("key"), _rejections("tenant")) == before
    assert "rate limiter failing open: redis unreachable" in caplog.text


def test_a_hung_redis_fails_open_without_headers(client_for, make_key, small_tenant, tmp_path, caplog):
    client = client_for(make_key("user", small_tenant))
    # A socket that accepts connections (the kernel's backlog) and never answers: a frozen Redis.
    path = str(tmp_path / "frozen.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as frozen:
        frozen.bind(path)
        frozen.listen(16)
        hung = {
            "default": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": f"unix://{path}",
                "KEY_PREFIX": "loopmem",
                "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
            }
        }
        with override_settings(CACHES=hung):
            responses = [client.get("/api/v1/projects") for _ in range(5)]
    assert [r.status_code for r in responses] == [200] * 5
    assert all("x-ratelimit-limit" not in r for r in responses)
    assert "rate limiter failing open: redis unreachable (TimeoutError)" in caplog.text


def test_the_counters_groups_keep_their_names_wherever_the_limiter_module_lives():
    # The group is hashed into each counter's Redis key: a renamed group resets every window on deploy, and during a
    # rolling deploy old and new workers would count in separate buckets (a client gets twice its limit).
    from loopmem.http import ratelimit

    assert (ratelimit._KEY_GROUP, ratelimit._TENANT_GROUP) == ("loopmem.ratelimit.key", "loopmem.ratelimit.tenant")
