"""A small typed client for loopmem's HTTP API (docs/api.md), standard library only.

Used by the MCP server, the Stop hook and tests. Each method calls one endpoint and returns the API's JSON
body. A non-2xx answer raises `LoopmemAPIError` (or its subclass for the error `code`); a network failure
raises `LoopmemUnreachable`. The client imports nothing from Django, so a process that uses it never loads
the settings (which would start the embedded database).
"""

from __future__ import annotations

import datetime
import email.utils
import http.client
import json
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, fields
from email.message import Message
from typing import Any, Literal

JSONObject = dict[str, Any]
RecallMode = Literal["semantic", "keyword", "hybrid"]
# Our own surfaces lead (DESIGN §11): the client recalls memories by meaning and by what was typed, fused, and finds
# a memory the moment it is written. The HTTP API's default stays `semantic`; pass mode="semantic" for it.
DEFAULT_RECALL_MODE: RecallMode = "hybrid"

USER_AGENT = "loopmem-client/1"

# A promotion job in one of these has finished; `pending` and `running` have not.
PROMOTION_FINISHED = frozenset({"succeeded", "skipped_unchanged", "failed", "budget_exceeded"})

_CANONICAL_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


# --- Errors ---------------------------------------------------------------------------------------------------


class LoopmemError(Exception):
    """Base of every error this client raises. `code` is stable and machine-readable; `status` is the HTTP
    status when the API answered, None when it did not (network failure, argument refused client-side)."""

    code: str = "loopmem_error"

    def __init__(
        self, message: str, *, code: str | None = None, status: int | None = None, details: JSONObject | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.status = status
        self.details: JSONObject = details or {}

    def envelope(self) -> JSONObject:
        """The error in the API's envelope shape, `{"error": {status, code, message, details}}`."""
        return {"error": {"status": self.status, "code": self.code, "message": self.message, "details": self.details}}

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class LoopmemAPIError(LoopmemError):
    """The API answered with a non-2xx status; status, code, message and details are its error envelope's."""

    status: int

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: JSONObject | None = None,
        *,
        body: JSONObject | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, code=code, status=status, details=details)
        self.body = body
        # From the `retry-after` header of a 429 or 503, when there is one.
        self.retry_after = retry_after

    def envelope(self) -> JSONObject:
        """The API's own error body when it sent one, else the same shape built from the fields."""
        if self.body is not None and isinstance(self.body.get("error"), dict):
            return self.body
        return super().envelope()


class Unauthorized(LoopmemAPIError):
    code = "unauthorized"


class Forbidden(LoopmemAPIError):
    code = "forbidden"


class NotFound(LoopmemAPIError):
    code = "not_found"


class ValidationFailed(LoopmemAPIError):
    code = "validation_failed"


class QuotaExceeded(LoopmemAPIError):
    code = "quota_exceeded"


class SecretDetected(LoopmemAPIError):
    """The write held what looks like a secret and the tenant refuses them: `details` has `kinds` and `spans`."""

    code = "secret_detected"


class RateLimited(LoopmemAPIError):
    code = "rate_limited"


class PromotionBudgetExceeded(LoopmemAPIError):
    code = "promotion_budget_exceeded"


class HeavyReadOverloaded(LoopmemAPIError):
    code = "heavy_read_overloaded"


class TenantHalted(LoopmemAPIError):
    code = "tenant_halted"


class ServerError(LoopmemAPIError):
    code = "server_error"


class AlreadySuperseded(LoopmemAPIError):
    """The memory has a newer version (`details.superseded_by`): correct that one."""

    code = "already_superseded"


class IdempotencyKeyReused(LoopmemAPIError):
    """This `Idempotency-Key` was already used with a different request."""

    code = "idempotency_key_reused"


class DatabaseUnavailable(LoopmemAPIError):
    code = "database_unavailable"


_ERRORS_BY_CODE: dict[str, type[LoopmemAPIError]] = {
    cls.code: cls
    for cls in (
        Unauthorized,
        Forbidden,
        NotFound,
        ValidationFailed,
        QuotaExceeded,
        SecretDetected,
        RateLimited,
        PromotionBudgetExceeded,
        HeavyReadOverloaded,
        TenantHalted,
        ServerError,
        AlreadySuperseded,
        IdempotencyKeyReused,
        DatabaseUnavailable,
    )
}


class LoopmemUnreachable(LoopmemError):
    """No answer from the API: refused connection, DNS failure, reset, TLS error."""

    code = "loopmem_unreachable"


class LoopmemTimeout(LoopmemUnreachable):
    """The API did not answer within the timeout."""

    code = "loopmem_timeout"


class InvalidArgument(LoopmemError, ValueError):
    """An argument refused before any request is sent (e.g. an id that goes into the URL path)."""


def api_error(status: int, body: object, headers: Mapping[str, str] | Message | None = None) -> LoopmemAPIError:
    """The exception for a non-2xx answer: its envelope's code picks the class, unknown codes keep the base."""
    retry_after = _retry_after(headers)
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return LoopmemAPIError(
            status, "unexpected_response", f"HTTP {status} without a loopmem error body", retry_after=retry_after
        )
    code = error.get("code")
    if not isinstance(code, str) or not code:
        code = "rate_limited" if status == 429 else "not_found" if status == 404 else f"http_{status}"
    message = error.get("message")
    details = error.get("details")
    cls = _ERRORS_BY_CODE.get(code, LoopmemAPIError)
    return cls(
        status,
        code,
        message if isinstance(message, str) else "",
        details if isinstance(details, dict) else {},
        body=body if isinstance(body, dict) else None,
        retry_after=retry_after,
    )


def _retry_after(headers: Mapping[str, str] | Message | None) -> float | None:
    """`Retry-After` as seconds from now: delta-seconds or an HTTP-date (RFC 9110), never below 0 (a date past or
    a negative delay means "now"); absent, unreadable, NaN or infinite is None (no hint: back off instead)."""
    raw = headers.get("retry-after") if headers is not None else None
    if raw is None or not str(raw).strip():
        return None
    text = str(raw).strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        if when.tzinfo is None:  # "-0000": UTC with no claim about the local zone
            when = when.replace(tzinfo=datetime.UTC)
        seconds = (when - datetime.datetime.now(datetime.UTC)).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(seconds, 0.0)


def path_segment(value: object, *, field: str) -> str:
    """`value` as one percent-encoded path segment. "" , "." and ".." are refused (`invalid_<field>`): an HTTP
    client or a proxy resolves dot segments, so they would name another route instead of this id."""
    if not isinstance(value, str) or value in ("", ".", ".."):
        raise InvalidArgument(
            f"`{field}` must be a non-empty string other than '.' and '..' (it goes into the URL path)",
            code=f"invalid_{field}",
            details={field: ["may not be empty, '.' or '..'"]},
        )
    return urllib.parse.quote(value, safe="")


def canonical_uuid(value: object, *, field: str, code: str, message: str | None = None) -> str:
    """A canonical hyphenated UUID, lowercased; anything else is refused client-side with `code`."""
    if not isinstance(value, str) or not _CANONICAL_UUID.match(value.strip()):
        raise InvalidArgument(
            message or f"`{field}` must be a canonical UUID (8-4-4-4-12 hexadecimal digits)",
            code=code,
            details={field: ["must be a canonical UUID"]},
        )
    return value.strip().lower()


# --- Transport ------------------------------------------------------------------------------------------------


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # urllib would resend the Authorization header to wherever a redirect points; the API never redirects,
    # so a redirect is reported as an error instead of followed.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


QueryValue = str | int | float | bool | list[str] | None
Source = Literal["explicit", "promoted", "imported"]


@dataclass(frozen=True)
class MemoryFilters:
    """Filters on your memories (recall, merged recall's memory half, list); every one set must hold.

    `tags`: all of them on the memory; `tags_any`: at least one; `metadata`: a JSON object the memory's metadata
    contains; `created_after` / `created_before`: ISO 8601, strictly after / before; `min_confidence`: 0..1.
    """

    tags: list[str] | None = None
    tags_any: list[str] | None = None
    metadata: JSONObject | None = None
    source: Source | None = None
    created_after: str | None = None
    created_before: str | None = None
    min_confidence: float | None = None

    def body(self) -> JSONObject:
        """As body fields (the recalls)."""
        return _present(**{f.name: getattr(self, f.name) for f in fields(self)})

    def query(self) -> dict[str, QueryValue]:
        """As query parameters (the list): tags repeated, metadata as JSON text."""
        params: dict[str, QueryValue] = dict(self.body())
        if self.metadata is not None:
            params["metadata"] = json.dumps(self.metadata)
        return params


class LoopmemClient:
    """The API as one agent key sees it. Thread-safe: it holds no per-request state."""

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
        body: JSONObject | None = None,
        timeout: float | None = None,
    ) -> JSONObject:
        """One call: the JSON body of a 2xx answer, or the exception for anything else."""
        url = self.base_url + path
        params = {key: _query_text(value) for key, value in (query or {}).items() if value is not None}
        if params:
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        headers = {"Authorization": f"Bearer {self._api_key}", "Accept": "application/json", "User-Agent": USER_AGENT}
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

    # --- Memory ---------------------------------------------------------------------------------------------

    def memory_remember(
        self,
        *,
        text: str | None = None,
        tier: Literal["long_term", "session"] | None = None,
        confidence: float | None = None,
        tags: list[str] | None = None,
        metadata: JSONObject | None = None,
        source_session_id: str | None = None,
        project_id: str | None = None,
        session_id: str | None = None,
        role: Literal["user", "assistant", "system", "fact"] | None = None,
        content: str | None = None,
        expires_at: str | None = None,
    ) -> JSONObject:
        """POST /api/v1/memory: a long-term memory (`text`), or a session turn (`tier="session"`)."""
        return self.request(
            "POST",
            "/api/v1/memory",
            body=_present(
                tier=tier,
                text=text,
                confidence=confidence,
                tags=tags,
                metadata=metadata,
                source_session_id=source_session_id,
                project_id=project_id,
                session_id=session_id,
                role=role,
                content=content,
                expires_at=expires_at,
            ),
        )

    def memory_recall(
        self,
        *,
        query: str,
        limit: int | None = None,
        include_superseded: bool | None = None,
        project_id: str | None = None,
        filters: MemoryFilters | None = None,
        mode: RecallMode | None = DEFAULT_RECALL_MODE,
    ) -> JSONObject:
        """POST /api/v1/memory/recall: the subject's long-term memories for `query` (hybrid by default: by meaning
        and by the words typed; None sends no mode, the API's own default), among those that match `filters`
        (applied inside the search, so a filtered recall is as complete as any)."""
        body = _present(
            query=query, limit=limit, include_superseded=include_superseded, project_id=project_id, mode=mode
        )
        return self.request("POST", "/api/v1/memory/recall", body={**body, **(filters or MemoryFilters()).body()})

    def memory_list(
        self,
        *,
        limit: int | None = None,
        offset: int | None = None,
        include_superseded: bool | None = None,
        source: Source | None = None,
        filters: MemoryFilters | None = None,
    ) -> JSONObject:
        """GET /api/v1/memory: the subject's long-term memories, newest first (matching `filters`)."""
        query: dict[str, QueryValue] = {
            **(filters or MemoryFilters()).query(),
            "limit": limit,
            "offset": offset,
            "include_superseded": include_superseded,
        }
        if source is not None:
            query["source"] = source
        return self.request("GET", "/api/v1/memory", query=query)

    def memory_get(self, memory_id: str) -> JSONObject:
        """GET /api/v1/memory/:id: one of your memories, live or superseded."""
        memory_id = canonical_uuid(memory_id, field="id", code="invalid_memory_id")
        return self.request("GET", f"/api/v1/memory/{memory_id}")

    def memory_history(self, memory_id: str) -> JSONObject:
        """GET /api/v1/memory/:id/history: the memory's versions, oldest first, up to the live one."""
        memory_id = canonical_uuid(memory_id, field="id", code="invalid_memory_id")
        return self.request("GET", f"/api/v1/memory/{memory_id}/history")

    def memory_correct(
        self,
        memory_id: str,
        *,
        text: str | None = None,
        confidence: float | None = None,
        tags: list[str] | None = None,
        metadata: JSONObject | None = None,
    ) -> JSONObject:
        """PATCH /api/v1/memory/:id: a corrected new version (the old one is kept in its history).

        The given fields replace the old values, the rest are carried over; at least one must be given.
        `already_superseded` (409) means a newer version exists: its id is in `details.superseded_by`."""
        memory_id = canonical_uuid(memory_id, field="id", code="invalid_memory_id")
        body = _present(text=text, confidence=confidence, tags=tags, metadata=metadata)
        return self.request("PATCH", f"/api/v1/memory/{memory_id}", body=body)

    def memory_batch(self, memories: list[JSONObject]) -> JSONObject:
        """POST /api/v1/memory/batch: up to 100 remember bodies, each written (or refused) on its own."""
        return self.request("POST", "/api/v1/memory/batch", body={"memories": memories})

    def memory_forget(self, memory_id: str) -> JSONObject:
        """DELETE /api/v1/memory/:id. The id goes into the path, so it must be a canonical UUID."""
        memory_id = canonical_uuid(memory_id, field="id", code="invalid_memory_id")
        return self.request("DELETE", f"/api/v1/memory/{memory_id}")

    def memory_promote(self, session_id: str) -> JSONObject:
        """POST /api/v1/memory/promote: compile the session's turns into long-term memories, asynchronously."""
        return self.request("POST", "/api/v1/memory/promote", body={"session_id": session_id})

    def memory_promotion(self, session_id: str, *, timeout: float | None = None) -> JSONObject:
        """GET /api/v1/memory/promote/:session_id: your last promotion job for the session (`NotFound` if none):
        `data.status` (pending, running, succeeded, skipped_unchanged, failed, budget_exceeded), counts, ids."""
        segment = path_segment(session_id, field="session_id")
        return self.request("GET", f"/api/v1/memory/promote/{segment}", timeout=timeout)

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

    def memory_graduate(self, *, memory_id: str, re_scope: Literal["inherit", "global"] | None = None) -> JSONObject:
        """POST /api/v1/memory/graduate: write a memory into the Knowledge Wiki (owner-visible)."""
        return self.request("POST", "/api/v1/memory/graduate", body=_present(memory_id=memory_id, re_scope=re_scope))

    def session_history(self, session_id: str, *, limit: int | None = None, offset: int | None = None) -> JSONObject:
        """GET /api/v1/memory/sessions/:session_id: the session's unexpired turns in order."""
        segment = path_segment(session_id, field="session_id")
        return self.request("GET", f"/api/v1/memory/sessions/{segment}", query={"limit": limit, "offset": offset})

    # --- Recall and knowledge ---------------------------------------------------------------------------------

    def recall_context(
        self,
        *,
        query: str,
        project_id: str | None = None,
        limit: int | None = None,
        session_id: str | None = None,
        filters: MemoryFilters | None = None,
        mode: RecallMode | None = DEFAULT_RECALL_MODE,
    ) -> JSONObject:
        """POST /api/v1/recall: memories and knowledge merged, with `meta.recall_id` for `recall_referenced`; `mode`
        is how the memory half reads (hybrid by default); `filters` narrow the memory half only."""
        body = _present(query=query, project_id=project_id, limit=limit, session_id=session_id, mode=mode)
        return self.request("POST", "/api/v1/recall", body={**body, **(filters or MemoryFilters()).body()})

    def recall_referenced(self, *, recall_id: str, article_ids: list[str]) -> JSONObject:
        """POST /api/v1/recall/:recall_id/referenced: which surfaced articles the answer actually used."""
        recall_id = canonical_uuid(
            recall_id,
            field="recall_id",
            code="invalid_recall_id",
            message="The `recall_id` path segment must be the `meta.recall_id` UUID from a recall response.",
        )
        return self.request("POST", f"/api/v1/recall/{recall_id}/referenced", body={"article_ids": article_ids})

    def knowledge_search(
        self,
        *,
        query: str,
        mode: Literal["keyword", "semantic", "combined"] | None = None,
        limit: int | None = None,
        project_id: str | None = None,
    ) -> JSONObject:
        """GET /api/v1/knowledge/search: Knowledge Wiki articles for `query`."""
        return self.request(
            "GET",
            "/api/v1/knowledge/search",
            query={"q": query, "mode": mode, "limit": limit, "project_id": project_id},
        )

    # --- Projects -------------------------------------------------------------------------------------------

    def resolve_project(
        self, *, slug: str | None = None, repo_url: str | None = None, name: str | None = None
    ) -> JSONObject:
        """GET /api/v1/projects/resolve: the project for a slug, a repo URL or a name (in that precedence)."""
        return self.request("GET", "/api/v1/projects/resolve", query={"slug": slug, "repo_url": repo_url, "name": name})

    def project_list(self, *, limit: int | None = None, offset: int | None = None) -> JSONObject:
        """GET /api/v1/projects: the tenant's projects."""
        return self.request("GET", "/api/v1/projects", query={"limit": limit, "offset": offset})


def _finished(body: JSONObject) -> bool:
    data = body.get("data")
    return isinstance(data, dict) and data.get("status") in PROMOTION_FINISHED


def _present(**fields: Any) -> JSONObject:
    """The fields that were given: an omitted argument is left out of the body, not sent as null."""
    return {key: value for key, value in fields.items() if value is not None}


def _query_text(value: str | int | float | bool | list[str]) -> str | list[str]:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return [str(item) for item in value]
    return str(value)


def _json_or_none(raw: bytes) -> object:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
