"""`Idempotency-Key` on writes: a client that timed out retries with the same key and gets the first answer back,
never a second write (docs/api.md, "Idempotency-Key").

A key is scoped to the caller's (tenant, subject): another subject's identical key is another key. The claim, the
write and the recorded answer share one transaction:

1. `INSERT ... ON CONFLICT (tenant_id, subject_id, key) DO NOTHING`. PostgreSQL makes a second inserter of the same
   key wait until the first transaction ends; then the insert either wins (the first rolled back: nothing was
   written) or conflicts with a committed record, which is replayed. So concurrent retries produce exactly one
   write, and the loser waits for it rather than failing. A record older than the retention window counts as
   absent (it is taken over, as if pruned).
2. The write runs; its answer (status and body) is stored on the record; the transaction commits both at once.
   An error answer raises out of the transaction, so nothing is recorded and a retry is evaluated afresh.

Free of DRF: `loopmem.http.base_view.idempotent` does the HTTP half.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from loopmem.errors import DatabaseUnavailable, IdempotencyKeyReused, InvalidIdempotencyKey
from loopmem.models import IdempotencyRecord

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_LENGTH = 255
# Printable ASCII without spaces: UUIDs, ULIDs, base64 and hex tokens all fit; nothing a log or header mangles.
# Also the header's OpenAPI `pattern` (memory.schema).
KEY_PATTERN = rf"[\x21-\x7e]{{1,{MAX_KEY_LENGTH}}}"
_KEY = re.compile(KEY_PATTERN)

_TABLE = IdempotencyRecord._meta.db_table
_CLAIM = f"""
INSERT INTO {_TABLE} (tenant_id, subject_id, key, operation, request_hash, response_status, response_body, created_at)
VALUES (%(tenant_id)s, %(subject_id)s, %(key)s, %(operation)s, %(request_hash)s, 0, '{{}}'::jsonb, %(now)s)
ON CONFLICT (tenant_id, subject_id, key) DO UPDATE
    SET operation = EXCLUDED.operation, request_hash = EXCLUDED.request_hash, response_status = 0,
        response_body = '{{}}'::jsonb, created_at = EXCLUDED.created_at
    WHERE {_TABLE}.created_at < %(expired_before)s
RETURNING id
"""


@dataclass(frozen=True)
class Stored:
    """A recorded answer, to replay."""

    status: int
    body: Any


def parse_key(raw: str) -> str:
    """The header's value, or 400 `invalid_idempotency_key` (empty, too long, spaces or non-ASCII)."""
    if not _KEY.fullmatch(raw):
        raise InvalidIdempotencyKey(details={"max_length": MAX_KEY_LENGTH})
    return raw


def request_hash(operation: str, body: Any) -> str:
    """sha256 of the operation and the body as canonical JSON: key order and spacing do not matter."""
    canonical = json.dumps([operation, body], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def claim(*, tenant_id: uuid.UUID, subject_id: str, key: str, operation: str, digest: str) -> Stored | None:
    """Inside the caller's transaction: None when this request owns the key (go on, then `record`), else the
    first answer to replay. 422 `idempotency_key_reused` when the key was first used for another request."""
    now = timezone.now()
    params: dict[str, Any] = {
        "tenant_id": tenant_id,
        "subject_id": subject_id,
        "key": key,
        "operation": operation,
        "request_hash": digest,
        "now": now,
        "expired_before": now - timedelta(seconds=settings.IDEMPOTENCY_RETENTION_SECONDS),
    }
    first = None
    # Twice at most: the record that refused the insert can be pruned or erased before it is read; then the
    # second insert owns the key.
    for _attempt in range(2):
        with connection.cursor() as cursor:
            cursor.execute(_CLAIM, params)
            if cursor.fetchone() is not None:
                return None
        first = IdempotencyRecord.objects.filter(tenant_id=tenant_id, subject_id=subject_id, key=key).first()
        if first is not None:
            break
    if first is None:  # pruned twice in a row between insert and read: the client may simply retry
        raise DatabaseUnavailable("The Idempotency-Key record changed under this request; retry shortly")
    if first.request_hash != digest:
        raise IdempotencyKeyReused(details={"operation": first.operation})
    return Stored(first.response_status, first.response_body)


def record(*, tenant_id: uuid.UUID, subject_id: str, key: str, status: int, body: Any) -> None:
    """Store the answer on the claimed record (same transaction as the write)."""
    IdempotencyRecord.objects.filter(tenant_id=tenant_id, subject_id=subject_id, key=key).update(
        response_status=status, response_body=body
    )
