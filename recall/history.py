"""Which articles a session has already been shown (containment), kept in Redis so every process shares it.

Keyed by (tenant, subject, session, article): both halves of the caller's scope come before the client's
session token, so another tenant or agent choosing the same token can never suppress rows from this recall,
and an erasure finds every key of a subject (or tenant) by prefix. Members are article ids, never text.
Best effort: Redis trouble (`loopmem.redis.outage`) means nothing is suppressed, which is the behaviour
without a session.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Iterable

from django.conf import settings

from loopmem.redis import outage
from loopmem.redis.client import redis_client

PREFIX = "loopmem:recall_history"


def _digest(*parts: str) -> str:
    # Hashed as a JSON list: agent and session ids may contain ":", and ("a", "b:c") must not be ("a:b", "c").
    return hashlib.sha256(json.dumps(list(parts)).encode()).hexdigest()


def tenant_pattern(tenant_id: uuid.UUID) -> str:
    """A SCAN pattern matching every history key of the tenant (erasure)."""
    return f"{PREFIX}:{tenant_id}:*"


def subject_pattern(tenant_id: uuid.UUID, subject_id: str) -> str:
    """A SCAN pattern matching every history key of one subject, whatever its sessions (erasure)."""
    return f"{PREFIX}:{tenant_id}:{_digest(str(tenant_id), subject_id)}:*"


def _key(tenant_id: uuid.UUID, subject_id: str, session_id: str) -> str:
    # Tenant, then subject, then session: an erasure finds a subject's keys by prefix without knowing its
    # sessions. Ids are hashed: a key names no subject or session in clear.
    return f"{subject_pattern(tenant_id, subject_id)[:-1]}{_digest(str(tenant_id), subject_id, session_id)}"


def shown_ids(*, tenant_id: uuid.UUID, subject_id: str, session_id: str | None, ids: Iterable[str]) -> set[str]:
    """Which of `ids` this session was shown within the TTL (empty without a session)."""
    wanted = list(ids)
    if not session_id or not wanted:
        return set()
    key = _key(tenant_id, subject_id, session_id)
    now = time.time()
    scores = outage.call("recall history", lambda: redis_client().zmscore(key, wanted), fallback=None)
    if scores is None:  # Redis unreachable: containment skipped
        return set()
    return {i for i, expiry in zip(wanted, scores, strict=True) if expiry is not None and expiry > now}


def mark_shown(*, tenant_id: uuid.UUID, subject_id: str, session_id: str | None, ids: Iterable[str]) -> None:
    """Remember that this session was shown `ids` (each entry expires after the history TTL)."""
    shown = list(ids)
    if not session_id or not shown:
        return
    ttl = settings.RECALL_HISTORY_TTL_SECONDS
    expiry = time.time() + ttl
    key = _key(tenant_id, subject_id, session_id)

    def record() -> None:
        pipe = redis_client().pipeline()
        pipe.zadd(key, dict.fromkeys(shown, expiry))
        pipe.zremrangebyscore(key, "-inf", time.time())  # forget what expired
        pipe.expire(key, ttl)
        pipe.execute()

    outage.call("recall history", record, fallback=None)  # unreachable: not recorded
