"""Fixtures for the agent-side distribution's tests: the live service (pytest-django's `live_server`, as the MCP
tests use it), agent keys for it, and the typed clients and store acting as them. The code under test imports no
Django; only the fixtures that issue keys do."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

# httpx comes with requirements/integrations.txt (dev.txt includes it); without it these tests are skipped.
pytest.importorskip("httpx")

from agent.httpx_client import AsyncClient, Client
from tests.factories import TenantFactory
from tests.mcp.conftest import _static_url_for_live_server, live_db, live_server, silent_server

__all__ = ["_static_url_for_live_server", "live_db", "live_server", "silent_server"]


class Keys:
    """Agent keys on the live server: `key(name)` is agent `name` of the test's tenant, `foreign(name)` of another."""

    def __init__(self, url: str, make_key: Any, tenant: Any) -> None:
        self.url = url
        self._make_key = make_key
        self.tenant = tenant
        self._other_tenant: Any = None
        self._issued: dict[tuple[str, str], str] = {}

    def key(self, agent_id: str) -> str:
        return self._issue(self.tenant, agent_id)

    def foreign(self, agent_id: str) -> str:
        if self._other_tenant is None:
            self._other_tenant = TenantFactory(slug="other-tenant")
        return self._issue(self._other_tenant, agent_id)

    def _issue(self, tenant: Any, agent_id: str) -> str:
        # One live key per agent and role: a second call hands back the first key.
        if (tenant.slug, agent_id) not in self._issued:
            self._issued[tenant.slug, agent_id] = self._make_key("agent", tenant, agent_id=agent_id).raw_key
        return self._issued[tenant.slug, agent_id]


@pytest.fixture
def keys(live_server: Any, make_key: Any, tenant: Any) -> Keys:
    return Keys(live_server.url, make_key, tenant)


@pytest.fixture
def client(keys: Keys) -> Iterator[Client]:
    with Client(keys.url, keys.key("coder-1")) as made:
        yield made


@pytest.fixture
def async_client(keys: Keys) -> AsyncClient:
    return AsyncClient(keys.url, keys.key("coder-1"))
