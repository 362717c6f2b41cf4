"""`Client` and `AsyncClient`: the whole public API over httpx, with retries, idempotency keys and timeouts.

- Every write carries a fresh `Idempotency-Key` (a UUID), reused by its own retries, so a write whose answer was
  lost is answered once more by the server instead of being written twice (docs/api.md, "Idempotency-Key").
- 429 and 503 are retried after `Retry-After` when the server sends one, else after a jittered exponential
  backoff; a wait longer than `RetryPolicy.max_retry_after`, a halted tenant and a spent promotion budget are
  raised at once, because waiting seconds would not help. A call that is not safe to repeat (a correction, a
  forget) is retried after a 429 and after a 503 whose code says nothing ran (`NEVER_RAN`), not after any 503.
- A lost answer (timeout, reset, refused connection) is retried only for calls that are safe to repeat (`Call`).
- Every request has a connect and a read timeout; errors are `agent.wire`'s typed exceptions with the API's
  stable `code`.

Neither imports Django nor the service: this module is the agent-side distribution's (`pip install ./agent`).
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
import uuid
import weakref
from collections.abc import AsyncGenerator, Awaitable
from dataclasses import dataclass
from typing import Any

import httpx

from agent.config import agent_config_from_env
from agent.endpoints import Call, Endpoints
from agent.wire import (
    JSONObject,
    LoopmemAPIError,
    LoopmemError,
    LoopmemTimeout,
    LoopmemUnreachable,
    api_error,
    json_or_none,
    query_text,
)

USER_AGENT = "loopmem-agent/0.1"
IDEMPOTENCY_HEADER = "Idempotency-Key"
# Refusals that last longer than a client should sleep: a custody halt ends when an operator says so, a promotion
# budget with the hour.
NOT_TRANSIENT = frozenset({"tenant_halted", "promotion_budget_exceeded"})
# 503s whose request the service says never took effect (docs/api.md: "nothing was committed", "nothing was
# written"). Any other 503, a bodiless one from a proxy above all, may come after the request was forwarded and
# run, so a call that is not safe to repeat is not sent again after it.
NEVER_RAN = frozenset({"database_unavailable", "database_timeout", "gate_unavailable"})


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait before sending a call again."""

    retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 8.0
    # A `Retry-After` longer than this is raised (as `RateLimited` etc., with `retry_after`) rather than slept.
    max_retry_after: float = 30.0

    def delay(self, attempt: int, error: LoopmemError, call: Call) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None to raise `error` now."""
        if attempt >= self.retries:
            return None
        if isinstance(error, LoopmemAPIError):
            if error.status not in (429, 503) or error.code in NOT_TRANSIENT:
                return None
            # A 429 is refused before anything runs; a 503 only when its code says so.
            if error.status == 503 and not call.replayable and error.code not in NEVER_RAN:
                return None
            if error.retry_after is not None:
                return float(error.retry_after) if error.retry_after <= self.max_retry_after else None
            return self._backoff(attempt)
        if isinstance(error, LoopmemUnreachable) and call.replayable:
            return self._backoff(attempt)
        return None

    def _backoff(self, attempt: int) -> float:
        # Jittered so that clients refused together do not come back together.
        ceiling = min(self.max_delay, self.base_delay * 2.0**attempt)
        return ceiling * (0.5 + random.random() / 2)


NO_RETRIES = RetryPolicy(retries=0)


class _Transport:
    """What both clients share: the URL, headers, timeouts, and turning an answer into a body or an exception."""

    def __init__(
        self, base_url: str, api_key: str, *, timeout: float, connect_timeout: float, retry: RetryPolicy
    ) -> None:
        url = httpx.URL(base_url.strip())
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"the loopmem URL must be http(s)://host[:port], got {base_url!r}")
        if not api_key.strip():
            raise ValueError("an API key is required")
        self.base_url = base_url.strip().rstrip("/")
        self.retry = retry
        self.timeout = httpx.Timeout(timeout, connect=min(connect_timeout, timeout))
        self._headers = {"Authorization": f"Bearer {api_key.strip()}", "User-Agent": USER_AGENT}

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}({self.base_url!r})"

    def request_args(self, call: Call, idempotency_key: str | None) -> dict[str, Any]:
        headers = {"Accept": "application/x-ndjson" if call.ndjson else "application/json"}
        if idempotency_key is not None:
            headers[IDEMPOTENCY_HEADER] = idempotency_key
        content = None
        if call.body is not None:
            content = json.dumps(call.body).encode()
            headers["Content-Type"] = "application/json"
        params = {key: query_text(value) for key, value in (call.query or {}).items() if value is not None}
        return {"method": call.method, "url": call.path, "params": params, "content": content, "headers": headers}

    def answer(self, call: Call, response: httpx.Response) -> JSONObject:
        """The JSON body of a 2xx answer, or the exception for anything else."""
        status = response.status_code
        if 300 <= status < 400:
            raise LoopmemAPIError(
                status,
                "unexpected_redirect",
                f"the API answered a redirect to {response.headers.get('location')!r}; the URL must be the "
                "service's own root URL (redirects are not followed, so the key never goes elsewhere)",
            )
        if status >= 400:
            raise api_error(status, json_or_none(response.content), response.headers)
        if call.ndjson:
            lines = [json.loads(line) for line in response.text.splitlines() if line.strip()]
            return {"data": lines}
        body = json_or_none(response.content)
        if not isinstance(body, dict):
            raise LoopmemAPIError(status, "unexpected_response", f"HTTP {status} without a JSON object body")
        return body

    def transport_error(self, exc: httpx.HTTPError) -> LoopmemError:
        if isinstance(exc, httpx.TimeoutException):
            return LoopmemTimeout(f"no answer from {self.base_url} within the timeout ({exc!r})")
        return LoopmemUnreachable(f"cannot reach loopmem at {self.base_url}: {exc!r}")


class Client(Endpoints[JSONObject]):
    """The API as one key sees it, synchronously. Thread-safe; reuse one per process and `close()` it."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        connect_timeout: float = 5.0,
        retry: RetryPolicy = RetryPolicy(),
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._t = _Transport(base_url, api_key, timeout=timeout, connect_timeout=connect_timeout, retry=retry)
        self.base_url = self._t.base_url
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=self._t._headers,
            timeout=self._t.timeout,
            follow_redirects=False,
            transport=transport,
        )

    @classmethod
    def from_env(cls, **options: Any) -> Client:
        """From LOOPMEM_URL, LOOPMEM_AGENT_KEY and LOOPMEM_CLIENT_TIMEOUT_SECONDS (docs/configuration.md)."""
        config = agent_config_from_env()
        return cls(config.url, config.agent_key, **{"timeout": config.timeout_seconds, **options})

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"

    def send(self, call: Call) -> JSONObject:
        key = str(uuid.uuid4()) if call.is_write else None
        attempt = 0
        while True:
            try:
                try:
                    response = self._http.request(**self._t.request_args(call, key))
                except httpx.HTTPError as exc:
                    raise self._t.transport_error(exc) from exc
                return self._t.answer(call, response)
            except LoopmemError as error:
                wait = self._t.retry.delay(attempt, error, call)
                if wait is None:
                    raise
                time.sleep(wait)
                attempt += 1

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(Endpoints[Awaitable[JSONObject]]):
    """The API as one key sees it, for asyncio: every method returns an awaitable of the JSON body."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        connect_timeout: float = 5.0,
        retry: RetryPolicy = RetryPolicy(),
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._t = _Transport(base_url, api_key, timeout=timeout, connect_timeout=connect_timeout, retry=retry)
        self.base_url = self._t.base_url
        self._transport = transport
        # One pool per event loop, as connections belong to the loop that opened them (see `_pool`).
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopPool] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()  # loops of several threads may share the client

    @classmethod
    def from_env(cls, **options: Any) -> AsyncClient:
        """From LOOPMEM_URL, LOOPMEM_AGENT_KEY and LOOPMEM_CLIENT_TIMEOUT_SECONDS (docs/configuration.md)."""
        config = agent_config_from_env()
        return cls(config.url, config.agent_key, **{"timeout": config.timeout_seconds, **options})

    def __repr__(self) -> str:
        return f"AsyncClient({self.base_url!r})"

    async def _pool(self) -> httpx.AsyncClient:
        """The running loop's pool, opened on first use and closed as the loop shuts down.

        Frameworks start a loop per synchronous call (asyncio.run), and a pool cannot be closed once its loop is:
        so each pool is closed by a small async generator started in its loop, which the loop finalizes as it
        shuts down (`shutdown_asyncgens`, which asyncio.run and Runner.run_sync call). A loop that already did so
        and stays open (Runner.run_sync keeps the thread's default loop for the next run) tracks no new generator:
        its pool lives as long as the loop, reused by every run on it, until `aclose`."""
        loop = asyncio.get_running_loop()
        with self._lock:
            # A loop closed without shutting its generators down leaves a pool nothing can close any more: drop it
            # (the collector then closes its sockets).
            for closed in [other for other in self._pools if other.is_closed()]:
                del self._pools[closed]
            entry = self._pools.get(loop)
            if entry is not None and not entry.http.is_closed:
                return entry.http
            http = httpx.AsyncClient(
                base_url=self.base_url,
                headers=self._t._headers,
                timeout=self._t.timeout,
                follow_redirects=False,
                transport=self._transport,
            )
            tracked = not getattr(loop, "_asyncgens_shutdown_called", False)  # asyncio's own flag for it
            entry = _LoopPool(http, self._closed_with_loop(loop, http) if tracked else None)
            self._pools[loop] = entry
        if entry.closer is not None:
            await entry.closer.asend(None)  # started here: the running loop now finalizes it
        return http

    async def _closed_with_loop(
        self, loop: asyncio.AbstractEventLoop, http: httpx.AsyncClient
    ) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            self._forget_pool(loop, http)
            await http.aclose()

    def _forget_pool(self, loop: asyncio.AbstractEventLoop, http: httpx.AsyncClient) -> None:
        with self._lock:
            entry = self._pools.get(loop)
            if entry is not None and entry.http is http:
                del self._pools[loop]

    def send(self, call: Call) -> Awaitable[JSONObject]:
        return self._asend(call)

    async def _asend(self, call: Call) -> JSONObject:
        key = str(uuid.uuid4()) if call.is_write else None
        attempt = 0
        while True:
            try:
                try:
                    response = await (await self._pool()).request(**self._t.request_args(call, key))
                except httpx.HTTPError as exc:
                    raise self._t.transport_error(exc) from exc
                return self._t.answer(call, response)
            except LoopmemError as error:
                wait = self._t.retry.delay(attempt, error, call)
                if wait is None:
                    raise
                await asyncio.sleep(wait)
                attempt += 1

    async def aclose(self) -> None:
        """Close the running loop's pool now (the client opens a new one if used again)."""
        with self._lock:
            entry = self._pools.get(asyncio.get_running_loop())
        if entry is None:
            return
        if entry.closer is not None:
            await entry.closer.aclose()  # its `finally` closes the pool and forgets it
        else:
            self._forget_pool(asyncio.get_running_loop(), entry.http)
            await entry.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@dataclass(frozen=True)
class _LoopPool:
    http: httpx.AsyncClient
    closer: AsyncGenerator[None, None] | None  # None: the loop no longer finalizes generators
