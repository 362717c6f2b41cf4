"""A small typed client for loopmem's HTTP API (docs/api.md), standard library only.

Used by the MCP server, the Stop hook and tests. Its endpoint methods are `agent.endpoints`' catalogue, the one the
httpx clients share; this module only sends each `Call` over urllib. Each returns the API's JSON body. A non-2xx
answer raises `LoopmemAPIError` (or its subclass for the error `code`); a network failure raises
`LoopmemUnreachable`. The client imports nothing from Django, so a process that uses it never loads the settings
(which would start the embedded database), and nothing outside the standard library, so the service's `manage.py
mcp` and Stop hook run on its own requirements.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from agent.endpoints import CALLS, Call, Endpoints
from agent.wire import (
    DEFAULT_RECALL_MODE,
    AlreadySuperseded,
    DatabaseUnavailable,
    Forbidden,
    HeavyReadOverloaded,
    IdempotencyKeyReused,
    InvalidArgument,
    JSONObject,
    LoopmemAPIError,
    LoopmemError,
    LoopmemTimeout,
    LoopmemUnreachable,
    MemoryFilters,
    NotFound,
    PromotionBudgetExceeded,
    QueryValue,
    QuotaExceeded,
    RateLimited,
    RecallMode,
    SecretDetected,
    ServerError,
    Source,
    TenantHalted,
    Unauthorized,
    ValidationFailed,
    api_error,
    canonical_uuid,
    path_segment,
)
from agent.wire import json_or_none as _json_or_none
from agent.wire import query_text as _query_text

# The names callers import from here (the types and errors are defined in `agent.wire`).
__all__ = [
    "DEFAULT_RECALL_MODE",
    "PROMOTION_FINISHED",
    "USER_AGENT",
    "AlreadySuperseded",
    "Call",
    "DatabaseUnavailable",
    "Endpoints",
    "Forbidden",
    "HeavyReadOverloaded",
    "IdempotencyKeyReused",
    "InvalidArgument",
    "JSONObject",
    "LoopmemAPIError",
    "LoopmemClient",
    "LoopmemError",
    "LoopmemTimeout",
    "LoopmemUnreachable",
    "MemoryFilters",
    "NotFound",
    "PromotionBudgetExceeded",
    "QueryValue",
    "QuotaExceeded",
    "RateLimited",
    "RecallMode",
    "SecretDetected",
    "ServerError",
    "Source",
    "TenantHalted",
    "Unauthorized",
    "ValidationFailed",
    "api_error",
    "canonical_uuid",
    "path_segment",
]

USER_AGENT = "loopmem-client/1"

# A promotion job in one of these has finished; `pending` and `running` have not.
PROMOTION_FINISHED = frozenset({"succeeded", "skipped_unchanged", "failed", "budget_exceeded"})

# --- Transport ------------------------------------------------------------------------------------------------


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # urllib would resend the Authorization header to wherever a redirect points; the API never redirects,
    # so a redirect is reported as an error instead of followed.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class LoopmemClient(Endpoints[JSONObject]):
    """The API as one agent key sees it. Thread-safe: it holds no per-request state.

    Every endpoint method is `Endpoints`'; `send` answers them over urllib. The `Call`'s `replayable` is not acted
    on: this client sends each request once, without retries and without an `Idempotency-Key`."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 30.0) -> None:
        parsed = urllib.parse.urlsplit(base_url.strip())
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"the loopmem URL must be http(s)://host[:port], got {base_url!r}")
        if not api_key.strip():
            raise ValueError("an API key is required")
        self.base_url = base_url.strip().rstrip("/")
        self._api_key = api_key.strip()
        self.timeout = timeout
        self._opener = urllib.request.build_opener(_NoRedirects)

    def __repr__(self) -> str:  # never the key
        return f"LoopmemClient({self.base_url!r})"

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, QueryValue] | None = None,
        body: Any = None,
        timeout: float | None = None,
        ndjson: bool = False,
    ) -> JSONObject:
        """One call: the JSON body of a 2xx answer (an NDJSON answer as `{"data": [line, ...]}`), or the exception
        for anything else."""
        url = self.base_url + path
        params = {key: _query_text(value) for key, value in (query or {}).items() if value is not None}
        if params:
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        headers = {
            "Authorization": f"Bearer {self._api_key}",
            "Accept": "application/x-ndjson" if ndjson else "application/json",
            "User-Agent": USER_AGENT,
        }
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        wait = self.timeout if timeout is None else timeout
        try:
            with self._opener.open(request, timeout=wait) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            raise self._error_from(exc, wait) from None
        except TimeoutError as exc:
            raise LoopmemTimeout(f"no answer from {self.base_url} within {wait:g}s") from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise LoopmemTimeout(f"no answer from {self.base_url} within {wait:g}s") from exc
            raise LoopmemUnreachable(f"cannot reach loopmem at {self.base_url}: {exc.reason}") from exc
        except (OSError, http.client.HTTPException) as exc:
            raise LoopmemUnreachable(f"cannot reach loopmem at {self.base_url}: {exc!r}") from exc
        if ndjson:
            return {"data": [json.loads(line) for line in raw.decode().splitlines() if line.strip()]}
        parsed = _json_or_none(raw)
        if not isinstance(parsed, dict):
            raise LoopmemAPIError(status, "unexpected_response", f"HTTP {status} without a JSON object body")
        return parsed

    def _error_from(self, exc: urllib.error.HTTPError, wait: float) -> LoopmemError:
        if 300 <= exc.code < 400:
            return LoopmemAPIError(
                exc.code,
                "unexpected_redirect",
                f"the API answered a redirect to {exc.headers.get('location')!r}; LOOPMEM_URL must be the "
                "service's own root URL (redirects are not followed, so the key never goes elsewhere)",
            )
        try:
            raw = exc.read()
        except TimeoutError:
            return LoopmemTimeout(f"no answer from {self.base_url} within {wait:g}s", details={"status": exc.code})
        except (OSError, http.client.HTTPException) as read_exc:
            return LoopmemUnreachable(f"loopmem at {self.base_url} dropped the connection: {read_exc!r}")
        finally:
            exc.close()
        return api_error(exc.code, _json_or_none(raw), exc.headers)

    def send(self, call: Call, *, timeout: float | None = None) -> JSONObject:
        """Send a prepared call; `timeout` replaces the client's for this one request."""
        return self.request(
            call.method, call.path, query=call.query, body=call.body, timeout=timeout, ndjson=call.ndjson
        )

    def memory_promotion(self, session_id: str, *, timeout: float | None = None) -> JSONObject:
        """GET /api/v1/memory/promote/:session_id: your last promotion job for the session (`NotFound` if none):
        `data.status` (pending, running, succeeded, skipped_unchanged, failed, budget_exceeded), counts, ids.
        `timeout` bounds this one read (`wait_for_promotion` spends what is left of its own)."""
        return self.send(CALLS.memory_promotion(session_id), timeout=timeout)

    def wait_for_promotion(self, session_id: str, *, timeout: float, interval: float = 0.5) -> JSONObject:
        """Read the session's last promotion job until it has finished or `timeout` seconds have passed; returns
        the last answer, whose `data.status` says which. It never runs past `timeout`: each read waits at most
        what is left of it, it stops looking when less than `interval` is left, and a later read that runs out
        of time leaves the previous answer standing."""
        deadline = time.monotonic() + timeout
        body = self.memory_promotion(session_id, timeout=self._time_left(deadline))
        while not _finished(body):
            if deadline - time.monotonic() <= interval:  # no time for another look
                return body
            time.sleep(interval)
            try:
                body = self.memory_promotion(session_id, timeout=self._time_left(deadline))
            except LoopmemTimeout:
                return body
        return body

    def _time_left(self, deadline: float) -> float:
        return max(min(self.timeout, deadline - time.monotonic()), 0.05)


def _finished(body: JSONObject) -> bool:
    data = body.get("data")
    return isinstance(data, dict) and data.get("status") in PROMOTION_FINISHED
