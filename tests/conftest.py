"""Shared fixtures: tenants, keys issued by the real service, and API clients carrying them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from loopmem.embedding import embedders
from loopmem.models import ApiKey, Tenant
from loopmem.reads import size_cache
from loopmem.redis import outage
from loopmem.tenancy.services import IssuedKey, api_key_create
from tests.factories import TenantFactory

pytest_plugins = ["tests.fake_llm"]


@pytest.fixture(autouse=True)
def _fresh_rate_limit_counters() -> None:
    # Rate-limit counters live in the real Redis; each test starts from zero. A test that made Redis fail on
    # purpose must not leave the process's outage latch open for the next one.
    outage.reset()
    cache.clear()
    # The per-process sizes that pick read paths too: a test that grows a set past a threshold sees it at once.
    size_cache.clear_all()


@pytest.fixture
def tenant(db: Any) -> Tenant:
    return TenantFactory.create(name="Acme", slug="acme")


@pytest.fixture
def other_tenant(db: Any) -> Tenant:
    return TenantFactory.create(name="Globex", slug="globex")


MakeKey = Callable[..., IssuedKey]


@pytest.fixture
def make_key(db: Any) -> MakeKey:
    counter = iter(range(1_000_000))

    def make(
        role: str = "agent", tenant: Tenant | None = None, agent_id: str | None = None, **kwargs: Any
    ) -> IssuedKey:
        if role in (ApiKey.Role.AGENT, ApiKey.Role.ORCHESTRATOR) and agent_id is None:
            agent_id = f"agent-{next(counter)}"
        return api_key_create(role=role, tenant=tenant, agent_id=agent_id, **kwargs)

    return make


@pytest.fixture
def agent_key(make_key: MakeKey, tenant: Tenant) -> IssuedKey:
    return make_key("agent", tenant, agent_id="agent-a")


@pytest.fixture
def user_key(make_key: MakeKey, tenant: Tenant) -> IssuedKey:
    return make_key("user", tenant)


@pytest.fixture
def superadmin_key(make_key: MakeKey) -> IssuedKey:
    return make_key("superadmin", None)


MakeClient = Callable[..., APIClient]


@pytest.fixture
def client_for() -> MakeClient:
    def make(issued: IssuedKey | None = None, impersonate: str | None = None) -> APIClient:
        client = APIClient()
        headers: dict[str, str] = {}
        if issued is not None:
            headers["HTTP_AUTHORIZATION"] = f"Bearer {issued.raw_key}"
        if impersonate is not None:
            headers["HTTP_X_IMPERSONATE_TENANT"] = impersonate
        client.credentials(**headers)
        return client

    return make


@pytest.fixture
def agent(client_for: MakeClient, agent_key: IssuedKey) -> Any:
    """An API client acting as agent-a of tenant acme."""
    return client_for(agent_key)


def error(status: int, code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The whole error body the API must answer."""
    return {"error": {"status": status, "code": code, "message": message, "details": details or {}}}


@pytest.fixture
def sent_tasks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...]]]:
    """Celery sends captured as (task name, args) instead of reaching the broker."""
    from celery import current_app

    sent: list[tuple[str, tuple[Any, ...]]] = []
    monkeypatch.setattr(current_app, "send_task", lambda name, args=(), **kw: sent.append((name, tuple(args))))
    return sent


class RecordingEmbedder:
    """The test embedding provider (feature hashing), recording every text it was sent."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._inner = embedders.HashingEmbedder()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return self._inner.embed(texts)

    def saw(self, values: Sequence[str]) -> list[str]:
        """Which of `values` reached the provider inside some text."""
        return [v for v in values if any(v in text for text in self.texts)]


@pytest.fixture
def recording_embedder(monkeypatch: pytest.MonkeyPatch) -> RecordingEmbedder:
    """The tenant's embedding provider ("hashing" in tests), recording what it is sent."""
    recorder = RecordingEmbedder()
    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: recorder)
    return recorder


# --- Citus routing: every statement an API request runs pins one tenant (tests/sql_routing.py) ---------------


@pytest.fixture(autouse=True)
def _api_statements_pin_a_tenant(request: pytest.FixtureRequest, django_db_blocker: Any) -> Any:
    """In the API suites (test_api_*.py), every statement a request issues must be routable to one shard."""
    if not request.module.__name__.rsplit(".", 1)[-1].startswith("test_api_"):
        yield
        return
    from tests.sql_routing_capture import capture_request_statements

    with capture_request_statements() as capture:
        yield
    with django_db_blocker.unblock():  # this fixture outlives the test's own database fixtures
        capture.assert_routable()
