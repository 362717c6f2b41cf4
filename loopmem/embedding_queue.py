"""A coalescing queue of rows waiting for their vector, one per (table, tenant), in Redis.

One Celery task per written row costs a kombu publish in the web worker and a consume, a task and a provider call
in the Celery worker: ~7 ms of CPU per write on this machine (issue 20), competing with the requests for the same
cores. Here a write pushes its row id onto its tenant's pending list, and a drain task is sent only when none is
scheduled (a flag set with the push, in one script). The drain claims up to `limit` ids at a time and embeds them in
one provider call, so a burst of writes costs one task and a few batched calls. It runs EMBEDDING_DRAIN_DELAY_SECONDS
(0.1 s) after the write that scheduled it: sent at once, a drain found one or two rows under a steady write stream,
and every drain's task, provider call and transaction competed with the next requests for the cores (served
remember p95 8.18-10.24 ms with the delay, 9.63-11.91 without, 1,000 writes on one subject, alternated).

Nothing is lost on a crash:
- A drain claims ids into a list named after its task id. A worker killed mid-batch leaves the claim; the broker
  redelivers the unacknowledged task (acks_late) with the same id, which finishes the claim before taking more.
- The flag is cleared only by the drain that finds the pending list empty, atomically with that check, so a write
  either lands before the check (and is drained) or after it (and schedules a new drain).
- A publish that fails clears the flag again, so the next write schedules the drain. Anything else that strands
  ids (Redis down at the push, a lost message, a drain that gave up) leaves a row with no vector, which the
  embedding sweep embeds within its interval, as for a lost per-row task.
"""

from __future__ import annotations

import functools
import logging
import uuid
from typing import Any

import redis
from django.conf import settings
from django.db import transaction

from loopmem import after_response, queue, redis_outage
from loopmem.heavy_read import redis_client

logger = logging.getLogger(__name__)

FLAG_TTL_SECONDS = 600  # a drain whose message was lost stops blocking new ones after this; the sweep covers it
PENDING_TTL_SECONDS = 86_400  # ids nobody drains (Redis kept them, the broker lost the task) expire
CLAIM_TTL_SECONDS = 86_400

# KEYS: pending, flag. ARGV: row id, flag ttl, pending ttl. Returns 1 when the caller must send the drain task.
_PUSH = """
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
if redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[2]) then return 1 end
return 0
"""

# KEYS: pending, flag, claim. ARGV: limit, claim ttl, flag ttl. The ids to embed now: an unfinished claim first
# (a redelivered task), else up to `limit` pending ids moved into the claim. None left: the flag is cleared.
_CLAIM = """
local held = redis.call('LRANGE', KEYS[3], 0, -1)
if #held > 0 then return held end
local ids = redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
if #ids == 0 then
  redis.call('DEL', KEYS[2])
  return ids
end
redis.call('LTRIM', KEYS[1], #ids, -1)
redis.call('RPUSH', KEYS[3], unpack(ids))
redis.call('EXPIRE', KEYS[3], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return ids
"""


def tenant_pattern(tenant_id: uuid.UUID | str) -> str:
    """Every queue key of the tenant (a tenant-wide erasure removes them)."""
    return f"loopmem:embed_queue:{tenant_id}:*"


class Keys:
    """The Redis keys of one (table, tenant) queue; the tenant comes first after the prefix, as elsewhere."""

    def __init__(self, table: str, tenant_id: uuid.UUID | str) -> None:
        base = f"loopmem:embed_queue:{tenant_id}:{table}"
        self.pending = f"{base}:pending"
        self.flag = f"{base}:scheduled"
        self._base = base

    def claim(self, claim_id: str) -> str:
        return f"{self._base}:claim:{claim_id}"


def enqueue_on_commit(table: str, task_name: str, tenant_id: uuid.UUID, row_id: object) -> None:
    """Queue `row_id` for embedding once the transaction commits (after the response, inside a request), sending
    `task_name(tenant_id)` if no drain of the tenant's queue is scheduled. Never fails the write."""
    call = functools.partial(_push, table, task_name, str(tenant_id), str(row_id))
    transaction.on_commit(functools.partial(after_response.run_or_defer, call))


def _push(table: str, task_name: str, tenant_id: str, row_id: str) -> None:
    if redis_outage.is_down():
        logger.warning("redis down, %s %s not queued for embedding; the sweep will embed it", table, row_id)
        return
    keys = Keys(table, tenant_id)
    try:
        schedule = _script(redis_client(), _PUSH)(
            keys=[keys.pending, keys.flag], args=[row_id, FLAG_TTL_SECONDS, PENDING_TTL_SECONDS]
        )
    except redis_outage.REDIS_ERRORS as exc:
        redis_outage.record_failure("embedding queue push", exc)
        logger.warning("could not queue %s %s for embedding; the sweep will embed it", table, row_id)
        return
    if schedule and not queue.send_now(task_name, (tenant_id,), countdown=settings.EMBEDDING_DRAIN_DELAY_SECONDS):
        try:
            unschedule(table, tenant_id)  # the ids pushed so far go with the next write's drain
        except redis_outage.REDIS_ERRORS as exc:
            redis_outage.record_failure("embedding queue flag", exc)


def claim(table: str, tenant_id: uuid.UUID | str, claim_id: str, limit: int) -> list[str]:
    """The next ids for the drain `claim_id` to embed (its unfinished claim first); [] when the queue is empty,
    which also ends the drain's schedule. Raises redis.RedisError."""
    keys = Keys(table, tenant_id)
    ids = _script(redis_client(), _CLAIM)(
        keys=[keys.pending, keys.flag, keys.claim(claim_id)], args=[limit, CLAIM_TTL_SECONDS, FLAG_TTL_SECONDS]
    )
    return [raw.decode() if isinstance(raw, bytes) else str(raw) for raw in ids]


def queued_rows(client: redis.Redis) -> dict[tuple[str, str], int]:
    """Ids in every tenant's queues by (table, "pending" | "claimed"): what the metrics gauge reads at scrape time."""
    waiting: dict[tuple[str, str], int] = {}
    for raw_key in client.scan_iter(match=tenant_pattern("*"), count=500):
        # loopmem:embed_queue:<tenant>:<table>:pending | ...:claim:<task id> (Keys); the flag is not a list.
        _, _, _, table, kind, *_ = raw_key.decode().split(":")
        if kind in ("pending", "claim"):
            state = "pending" if kind == "pending" else "claimed"
            waiting[(table, state)] = waiting.get((table, state), 0) + int(client.llen(raw_key))
    return waiting


def unschedule(table: str, tenant_id: uuid.UUID | str) -> None:
    """No drain is scheduled any more (its message could not be sent): the next write schedules one."""
    redis_client().delete(Keys(table, tenant_id).flag)


def release(table: str, tenant_id: uuid.UUID | str, claim_id: str) -> None:
    """The claim is done: its rows hold their vectors (or were left for the sweep)."""
    redis_client().delete(Keys(table, tenant_id).claim(claim_id))


def abandon(table: str, tenant_id: uuid.UUID | str, claim_id: str) -> None:
    """Give up on the tenant's queue (its provider fails for every text): drop the claim, the pending ids and the
    schedule. The rows keep no vector until the sweep embeds them; the next write starts a new drain."""
    keys = Keys(table, tenant_id)
    redis_client().delete(keys.claim(claim_id), keys.pending, keys.flag)


@functools.cache
def _script(client: redis.Redis, source: str) -> Any:
    # EVALSHA, loading the script on the first NOSCRIPT (a restarted Redis forgets scripts).
    return client.register_script(source)
