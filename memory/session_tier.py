"""The session tier: append-only turns of an agent session, a server-governed expiry, and the batched prune of
expired turns. Reads hide an expired turn whether or not the prune has run (`SessionTurnQuerySet.unexpired`)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from loopmem.errors import InvalidProjectId
from loopmem.secret_guard.policy import SecretReport, apply_secret_policy
from loopmem.tenancy.scope import Scope
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
    report: SecretReport | None = None,
) -> SessionTurn:
    """Append one turn to the subject's session. Turns are never updated.

    The tenant's secret policy runs first (SecretDetected, or redacted into `report`).
    """
    clean = apply_secret_policy(scope.tenant_id, {"content": content, "metadata": metadata}, report=report)
    content, metadata = clean["content"], clean["metadata"]
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


def session_prune(*, now: datetime | None = None, batch_size: int = PRUNE_BATCH_SIZE) -> int:
    """Delete expired turns of every tenant, in batches, until none are left; returns how many went."""
    cutoff = now or timezone.now()
    deleted = 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT tenant_id FROM session_memories WHERE expires_at < %s", [cutoff])
        tenant_ids = [row[0] for row in cursor.fetchall()]
    # Tenant by tenant: each batch names its tenant, so on Citus it runs on that tenant's shard alone (a LIMIT
    # subquery across shards is refused there).
    for tenant_id in tenant_ids:
        while True:
            # Batches keep each transaction (and its locks and WAL) small on a big backlog.
            with connection.cursor() as cursor:
                cursor.execute(
                    "DELETE FROM session_memories WHERE tenant_id = %s AND id IN "
                    "(SELECT id FROM session_memories WHERE tenant_id = %s AND expires_at < %s LIMIT %s)",
                    [tenant_id, tenant_id, cutoff, batch_size],
                )
                batch: int = cursor.rowcount
            deleted += batch
            if batch < batch_size:
                break
    return deleted
