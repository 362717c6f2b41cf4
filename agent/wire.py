"""What every loopmem client shares, standard library only: the API's JSON types, its errors as exceptions, the
checks on arguments that go into a URL path, and the memory filters.

`agent.endpoints` builds its calls from these and both transports (`agent.client` over urllib, `agent.httpx_client`
over httpx) raise these, so the endpoint catalogue can be shared without an import cycle. `agent.client` re-exports
every name, the one the callers import them from.
"""

from __future__ import annotations

import datetime
import email.utils
import json
import math
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, fields
from email.message import Message
from typing import Any, Literal

JSONObject = dict[str, Any]
RecallMode = Literal["semantic", "keyword", "hybrid", "deep"]
# Our own surfaces lead (DESIGN §11): the client recalls memories by meaning and by what was typed, fused, and finds
# a memory the moment it is written. The HTTP API's default stays `semantic`; pass mode="semantic" for it.
DEFAULT_RECALL_MODE: RecallMode = "hybrid"

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


QueryValue = str | int | float | bool | list[str] | None
Source = Literal["explicit", "promoted", "imported"]


@dataclass(frozen=True)
class MemoryFilters:
    """Filters on your memories (recall, merged recall's memory half, list); every one set must hold.

    `tags`: all of them on the memory; `tags_any`: at least one; `metadata`: a JSON object the memory's metadata
    contains; `created_after` / `created_before`: ISO 8601, strictly after / before; `min_confidence`: 0..1;
    `occurred_after` / `occurred_before`: ISO 8601 dates, an event day (a day the memory names, or the day it was
    written) strictly after / before.
    """

    tags: list[str] | None = None
    tags_any: list[str] | None = None
    metadata: JSONObject | None = None
    source: Source | None = None
    created_after: str | None = None
    created_before: str | None = None
    min_confidence: float | None = None
    occurred_after: str | None = None
    occurred_before: str | None = None

    def body(self) -> JSONObject:
        """As body fields (the recalls)."""
        return present(**{f.name: getattr(self, f.name) for f in fields(self)})

    def query(self) -> dict[str, QueryValue]:
        """As query parameters (the list): tags repeated, metadata as JSON text."""
        params: dict[str, QueryValue] = dict(self.body())
        if self.metadata is not None:
            params["metadata"] = json.dumps(self.metadata)
        return params


def present(**fields: Any) -> JSONObject:
    """The fields that were given: an omitted argument is left out of the body, not sent as null."""
    return {key: value for key, value in fields.items() if value is not None}


def query_text(value: object) -> str | list[str]:
    """A query parameter's value as the API reads it: booleans as true/false, a list as repeated parameters."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return [str(item) for item in value]
    return str(value)


def json_or_none(raw: bytes) -> object:
    """The body parsed as JSON, or None when it is empty or not JSON."""
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
