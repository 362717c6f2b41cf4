"""Session tier use cases: append a turn (server-governed expiry), read a session's history, prune."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from loopmem.errors import InvalidProjectId
from loopmem.scope import Scope
from memory.models import SessionTurn
from projects.selectors import project_in_tenant

PRUNE_BATCH_SIZE = 1000


def session_expires_at(requested: datetime | None, now: datetime) -> datetime:
    """Server-governed expiry: missing → now + ttl; earlier than now + sweep window → floored; later → kept.

    The floor guarantees a promotion sweep sees every turn before it expires.
    """
    floor = now + timedelta(seconds=settings.PROMOTION_SWEEP_WINDOW_SECONDS)
    if requested is None:
        return max(now + timedelta(seconds=settings.SESSION_TTL_SECONDS), floor)
    return max(requested, floor)


def session_append(
    *,
    scope: Scope,
    session_id: str,
    role: str,
    content: str,
    metadata: dict[str, Any] | None = None,
    expires_at: datetime | None = None,
) -> SessionTurn:
    """Append one turn to the subject's session. Turns are never updated."""
    if (
        scope.project_id is not None
        and project_in_tenant(tenant_id=scope.tenant_id, project_id=scope.project_id) is None
    ):
        raise InvalidProjectId()
    return SessionTurn.objects.create(
        tenant_id=scope.tenant_id,
        subject_id=scope.subject_id,
        project_id=scope.project_id,
        session_id=session_id,
        role=role,
        content=content,
        metadata=metadata or {},
        expires_at=session_expires_at(expires_at, timezone.now()),
    )


@dataclass(frozen=True)
class SessionHistory:
    """{results, meta: {total_count, limit, offset}} (reference §4.15)."""

    results: list[SessionTurn]
    total_count: int
    limit: int
    offset: int


def session_turns(*, scope: Scope, session_id: str, now: datetime | None = None) -> QuerySet[SessionTurn]:
    """The live turns of one of the subject's sessions, in insertion order."""
    return (
        SessionTurn.objects.for_scope(scope).filter(session_id=session_id).unexpired(now or timezone.now()).in_order()
    )


def session_history(*, scope: Scope, session_id: str, limit: int, offset: int) -> SessionHistory:
    """A page of the session, oldest first. An unknown or foreign session is simply empty."""
    turns = session_turns(scope=scope, session_id=session_id)
    return SessionHistory(
        results=list(turns[offset : offset + limit]), total_count=turns.count(), limit=limit, offset=offset
    )


def session_prune(*, now: datetime | None = None, batch_size: int = PRUNE_BATCH_SIZE) -> int:
    """Delete expired turns of every tenant, in batches, until none are left; returns how many went."""
    cutoff = now or timezone.now()
    deleted = 0
    while True:
        # Batches keep each transaction (and its locks and WAL) small on a big backlog.
        with connection.cursor() as cursor:
            cursor.execute(
                "DELETE FROM session_memories WHERE id IN "
                "(SELECT id FROM session_memories WHERE expires_at < %s LIMIT %s)",
                [cutoff, batch_size],
            )
            batch: int = cursor.rowcount
        deleted += batch
        if batch < batch_size:
            return deleted
