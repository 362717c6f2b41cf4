"""Domain errors: plain exceptions with a stable `code` and HTTP `status`.

Services and tasks raise these and never import DRF; `loopmem.http.error_responses` renders every one as
`{"error": {"status", "code", "message", "details"}}`. A code never changes once shipped.
"""

from __future__ import annotations

from typing import Any, ClassVar


class DomainError(Exception):
    """Base of every error the API reports on purpose."""

    status: ClassVar[int] = 400
    code: ClassVar[str] = "bad_request"
    default_message: ClassVar[str] = "Bad request"

    def __init__(self, message: str | None = None, *, details: dict[str, Any] | None = None) -> None:
        self.message = message or self.default_message
        self.details: dict[str, Any] = details or {}
        super().__init__(self.message)

    def body(self) -> dict[str, Any]:
        """The error envelope: `{"error": {"status", "code", "message", "details"}}`."""
        return {"error": {"status": self.status, "code": self.code, "message": self.message, "details": self.details}}


class BadRequest(DomainError):
    status, code, default_message = 400, "bad_request", "Bad request"


class Unauthorized(DomainError):
    status, code, default_message = 401, "unauthorized", "A valid API key is required"


class Forbidden(DomainError):
    status, code, default_message = 403, "forbidden", "This API key's role may not do that"


class NotFound(DomainError):
    status, code, default_message = 404, "not_found", "Not found"


class Conflict(DomainError):
    status, code, default_message = 409, "conflict", "Conflict"


class DuplicateSlug(DomainError):
    status, code, default_message = 409, "duplicate_slug", "A project with this slug already exists"


class AmbiguousResolution(DomainError):
    status, code, default_message = (
        409,
        "ambiguous_resolution",
        "The identifier matches more than one active project; use the slug",
    )


class ValidationFailed(DomainError):
    """Field-level input errors: `details` maps each field to a list of messages."""

    status, code, default_message = 422, "validation_failed", "Validation failed"


class ImpersonationTenantRequired(DomainError):
    status, code, default_message = (
        422,
        "impersonation_tenant_required",
        "A superadmin memory request needs an impersonation target (superadmin keys are tenant-less). "
        "Set the X-Impersonate-Tenant header so the tenant scope can be resolved.",
    )


class ImpersonationTenantNotFound(DomainError):
    status, code, default_message = (
        422,
        "impersonation_tenant_not_found",
        "X-Impersonate-Tenant names no tenant (give its id or slug)",
    )


class SubjectIdUnresolvable(DomainError):
    status, code, default_message = (
        422,
        "subject_id_unresolvable",
        "The subject scope for this API key could not be resolved; the memory operation was refused rather "
        "than writing/reading a null scope.",
    )


class InvalidProjectId(DomainError):
    status, code, default_message = (
        422,
        "invalid_project_id",
        "project_id must be the canonical UUID of one of your tenant's projects",
    )


class NoIdentifier(DomainError):
    status, code, default_message = 422, "no_identifier", "Give one of slug, repo_url or name"


class InvalidQuery(DomainError):
    status, code, default_message = 422, "invalid_query", "The `query` field must be a string."


class QuotaExceeded(DomainError):
    status, code, default_message = (
        422,
        "quota_exceeded",
        "The per-subject long-term memory quota has been reached. Forget existing memories before writing new ones.",
    )


class SelfSupersede(DomainError):
    status, code, default_message = 422, "self_supersede", "A memory cannot supersede itself"


class SupersedeCycle(DomainError):
    status, code, default_message = 422, "supersede_cycle", "The superseding memory is itself superseded"


class AlreadySuperseded(DomainError):
    status, code, default_message = 409, "already_superseded", "The memory is already superseded by another memory"


class LengthRequired(DomainError):
    status, code, default_message = (
        411,
        "length_required",
        "A chunked body cannot be read by this server; send the body with a Content-Length",
    )


class PayloadTooLarge(DomainError):
    """The body is over the route's size limit; refused before it is read, let alone parsed."""

    status, code, default_message = 413, "payload_too_large", "The request body is larger than this endpoint accepts"


class HeavyReadOverloaded(DomainError):
    status, code, default_message = (
        429,
        "heavy_read_overloaded",
        "Too many heavy reads are in flight for this tenant; retry shortly",
    )


class MissingSessionId(DomainError):
    status, code, default_message = (
        422,
        "missing_session_id",
        "A non-blank `session_id` is required to promote a session.",
    )


class PromotionBudgetExceeded(DomainError):
    status, code, default_message = (
        429,
        "promotion_budget_exceeded",
        "The tenant's per-hour memory-promotion budget has been reached. The session was not enqueued and no LLM "
        "call was made; retry later.",
    )


class QueryTooLong(DomainError):
    status, code, default_message = 422, "query_too_long", "The `query` must be at most 500 characters."


class InvalidSessionId(DomainError):
    status, code, default_message = (
        422,
        "invalid_session_id",
        "`session_id` must be a string of at most 200 bytes (it is never truncated).",
    )


class InvalidRecallId(DomainError):
    status, code, default_message = (
        422,
        "invalid_recall_id",
        "The `recall_id` path segment must be the `meta.recall_id` UUID from a recall response.",
    )


class InvalidArticleIds(DomainError):
    status, code, default_message = (
        422,
        "invalid_article_ids",
        "`article_ids` must be a non-empty list of article UUIDs.",
    )


class TooManyArticleIds(DomainError):
    status, code, default_message = 422, "too_many_article_ids", "At most 50 article ids may be referenced in one call."


class NotSurfaced(DomainError):
    status, code, default_message = 422, "not_surfaced", "Some article ids were not surfaced by this recall"


class RecordingFailed(DomainError):
    status, code, default_message = 500, "recording_failed", "The references could not be recorded; retry"


class InvalidMemoryId(DomainError):
    status, code, default_message = (
        422,
        "invalid_memory_id",
        "The `memory_id` field is required and must be a valid memory UUID.",
    )


class InvalidReScope(DomainError):
    status, code, default_message = 422, "invalid_re_scope", '`re_scope` must be "inherit" or "global".'


class AlreadyGraduated(DomainError):
    status, code, default_message = (
        409,
        "already_graduated",
        "This memory already graduated into another scope; its article cannot be re-scoped.",
    )


class MemoryQuarantined(DomainError):
    """The memory reads as an instruction to the memory system, or as a rule relaxing a control: the promotion
    guard's text signals (`memory.promotion.guard`) fire on it. `details.rule` names the signal, never the text."""

    status, code, default_message = (
        422,
        "memory_quarantined",
        "This memory reads as an instruction aimed at the memory system or as a rule that relaxes a security, "
        "approval, payment or access control; it does not graduate into the shared wiki.",
    )


class SecretDetected(DomainError):
    """The write holds what looks like a secret and the tenant's policy refuses it; nothing was stored.

    `details.kinds` lists the kinds found and `details.spans` maps each field to the `[start, end]` character
    offsets of its findings: never the secret itself.
    """

    status, code, default_message = (
        422,
        "secret_detected",
        "The request holds what looks like a secret (a credential, key, token or card number); nothing was "
        "stored. Store a pointer to where the secret is kept (a vault path, an environment variable name) instead.",
    )


class RateLimited(DomainError):
    """Too many requests; `retry_after` seconds until the window resets."""

    status, code, default_message = 429, "rate_limited", "Rate limit exceeded"

    def __init__(self, *, retry_after: int, limit: int) -> None:
        super().__init__(details={"retry_after": retry_after, "limit": limit})
        self.retry_after = retry_after


class TenantHalted(DomainError):
    status, code, default_message = (
        503,
        "tenant_halted",
        "Custody operations are halted for this tenant; reads continue, writes are refused",
    )


class NotReady(DomainError):
    status, code, default_message = 503, "not_ready", "A dependency is unreachable"


class DatabaseUnavailable(DomainError):
    """The database refused, dropped or never opened the connection (restart, failover): safe to retry."""

    status, code, default_message = 503, "database_unavailable", "The database is unreachable; retry shortly"


class DatabaseTimeout(DomainError):
    """A statement ran past its timeout and was cancelled; nothing it would have written was committed."""

    status, code, default_message = 503, "database_timeout", "The database did not answer in time; retry shortly"


class InvalidIdempotencyKey(DomainError):
    status, code, default_message = (
        400,
        "invalid_idempotency_key",
        "Idempotency-Key must be 1 to 255 printable ASCII characters without spaces",
    )


class IdempotencyKeyReused(DomainError):
    """The key was first sent with another body (or to another endpoint): its first answer is not this one's."""

    status, code, default_message = (
        422,
        "idempotency_key_reused",
        "This Idempotency-Key was already used with a different request",
    )


class ServerError(DomainError):
    status, code, default_message = 500, "server_error", "Internal server error"


# --- Knowledge (articles, search, novelty gate) ------------------------------------------------------------


class DuplicateTitle(DomainError):
    """An active (draft or published) article of the tenant already has this title.

    `details.article_id` names it when the caller may see it; the title namespace is tenant-wide, so a
    hidden article's title is taken too, but its id is not revealed.
    """

    status, code, default_message = 409, "duplicate_title", "An active article with this title already exists"


class GateUnavailable(DomainError):
    status, code, default_message = (
        503,
        "gate_unavailable",
        "The novelty gate could not assess the proposal (embedding unavailable); nothing was written. Retry later.",
    )


class EmbeddingUnavailable(DomainError):
    status, code, default_message = 503, "embedding_unavailable", "Embedding service unavailable"


class InvalidText(DomainError):
    """Text the database cannot store or that no client meant: a NUL character or a lone UTF-16 surrogate."""

    status, code, default_message = (
        400,
        "invalid_text",
        "Text may not contain NUL characters or lone UTF-16 surrogates",
    )


class InvalidNumber(DomainError):
    """A JSON number PostgreSQL's jsonb cannot hold: NaN, ±Infinity, or a literal that overflows a double."""

    status, code, default_message = (
        422,
        "invalid_number",
        "JSON numbers must be finite (NaN, Infinity and literals that overflow a double cannot be stored)",
    )


class TooDeeplyNested(DomainError):
    status, code, default_message = 400, "too_deeply_nested", "The JSON body is nested too deeply"
