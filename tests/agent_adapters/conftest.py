"""Fixtures for the agent-side distribution's tests: the live service (pytest-django's `live_server`, as the MCP
tests use it), agent keys for it, and the typed clients and store acting as them. The code under test imports no
Django; only the fixtures that issue keys do."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

# httpx comes with requirements/integrations.txt (dev.txt includes it); without it these tests are skipped.
pytest.importorskip("httpx")

from agent.httpx_client import AsyncClient, Client
from tests.factories import TenantFactory
from tests.mcp.conftest import _static_url_for_live_server, live_db, live_server, silent_server

if TYPE_CHECKING:
    from agent.langgraph_store import LoopmemStore

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
def keys(live_server: Any, make_key: Any, tenant: Any) -> Iterator[Keys]:
    yield Keys(live_server.url, make_key, tenant)
    # The fixtures that close the test's clients are torn down first (they use this one). Each live-server
    # connection is served by a thread holding a database session until it sees the client hang up; waiting for
    # them leaves no session behind, which would otherwise make dropping the test database fail.
    deadline = time.monotonic() + 5
    for thread in threading.enumerate():
        if thread.name.endswith("(process_request_thread)"):
            thread.join(max(deadline - time.monotonic(), 0))


@pytest.fixture
def client(keys: Keys) -> Iterator[Client]:
    with Client(keys.url, keys.key("coder-1")) as made:
        yield made


@pytest.fixture
def async_client(async_clients: Callable[[str], AsyncClient]) -> AsyncClient:
    return async_clients("coder-1")


@pytest.fixture
def async_clients(keys: Keys) -> Iterator[Callable[[str], AsyncClient]]:
    """`async_clients(agent_id)`: an AsyncClient for that agent, whose pools are all closed after the test. A pool on
    a loop that asyncio.run shut down is closed already; Runner.run_sync keeps its loop open (and a later
    asyncio.run unsets it without closing it), so its pool is closed here, on that loop. Left open, it keeps a
    live-server thread and its database session, and the test database cannot be dropped."""
    made: list[AsyncClient] = []

    def make(agent_id: str) -> AsyncClient:
        made.append(AsyncClient(keys.url, keys.key(agent_id)))
        return made[-1]

    yield make
    for client in made:
        for loop in list(client._pools):
            if not loop.is_closed() and not loop.is_running():
                loop.run_until_complete(client.aclose())


@pytest.fixture
def connect(keys: Keys) -> Iterator[Callable[..., LoopmemStore]]:
    """`connect(api_key, **options)`: a LoopmemStore on the live server, closed after the test. A client left open
    keeps its connection, and the live-server thread serving it keeps a database session (CONN_MAX_AGE), which
    makes dropping the test database fail."""
    from agent.langgraph_store import LoopmemStore  # langgraph is optional: only the tests that use it need it

    made: list[LoopmemStore] = []

    def connect(api_key: str, **options: Any) -> LoopmemStore:
        made.append(LoopmemStore.connect(keys.url, api_key, **options))
        return made[-1]

    yield connect
    for store in made:
        store.close()
