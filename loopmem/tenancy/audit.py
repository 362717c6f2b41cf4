"""The deletion audit: every forget, correction-supersede, erase and oversight delete leaves a row, never the text.

Texts and subjects are recorded as HMAC-SHA256 keyed with a key derived from LOOPMEM_SECRET_KEY. A hash of a
long text cannot be turned back into it; a plain sha256 of a very short or guessable text ("yes", a PIN, a
name) could be confirmed by hashing guesses, so the hash is keyed: without the deployment's secret no guess can
be checked against the record, and with it an operator can confirm that a given text was the one deleted.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from django.conf import settings
from django.db.models import QuerySet

from loopmem.models import DeletionAudit
from loopmem.tenancy.principal import Principal

OPERATOR = "operator"  # a management command: no key, the operator at the shell
SYSTEM = "system"  # the service's own decision (promotion's near-duplicate supersede)


@dataclass(frozen=True)
class Actor:
    """Who deleted and why: the API key and its role (or `operator` / `system`), and the endpoint or command."""

    role: str
    reason: str
    key_id: uuid.UUID | None = None

    @classmethod
    def of(cls, principal: Principal, reason: str) -> Actor:
        """An API caller: its key and role; `reason` names the endpoint (`"DELETE /api/v1/memory/:id"`)."""
        return cls(role=principal.role, reason=reason, key_id=principal.api_key.id)

    @classmethod
    def operator(cls, command: str) -> Actor:
        return cls(role=OPERATOR, reason=command)

    @classmethod
    def system(cls, reason: str) -> Actor:
        return cls(role=SYSTEM, reason=reason)


@cache
def _key(secret: str) -> bytes:
    # Domain-separated from every other use of the secret (provider-key encryption uses another label).
    return hashlib.sha256(b"loopmem/deletion-audit/v1:" + secret.encode()).digest()


def audit_hash(text: str | None) -> str:
    """The keyed hash the audit stores for a text ("" for no text)."""
    if text is None:
        return ""
    return hmac.new(_key(settings.SECRET_KEY), text.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Removed:
    """One row an action removed (or superseded, or blanked): its table, id, subject and text."""

    table: str
    row_id: object
    subject_id: str | None = None
    text: str | None = None


def audit_record(*, tenant_id: uuid.UUID, actor: Actor, action: str, rows: Iterable[Removed]) -> list[DeletionAudit]:
    """Write one audit row per removed row, in the caller's transaction (so the deletion and its record commit
    together or not at all)."""
    entries = [
        DeletionAudit(
            tenant_id=tenant_id,
            subject_hash=audit_hash(row.subject_id) if row.subject_id is not None else "",
            actor_key_id=actor.key_id,
            actor_role=actor.role,
            action=action,
            table_name=row.table,
            row_id=str(row.row_id),
            text_hash=audit_hash(row.text),
            reason=actor.reason[:200],
        )
        for row in rows
    ]
    return DeletionAudit.objects.bulk_create(entries) if entries else []


def audit_rows(
    *, tenant_id: uuid.UUID, since: datetime | None = None, subject_id: str | None = None
) -> QuerySet[DeletionAudit]:
    """The tenant's audit rows, oldest first; from `since`, of one subject (matched by its keyed hash)."""
    rows = DeletionAudit.objects.filter(tenant_id=tenant_id)
    if since is not None:
        rows = rows.filter(recorded_at__gte=since)
    if subject_id is not None:
        rows = rows.filter(subject_hash=audit_hash(subject_id))
    return rows.order_by("recorded_at", "id")
