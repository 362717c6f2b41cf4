"""A coalescing queue of rows waiting for their vector, one per (table, tenant), in Redis.

One Celery task per written row costs a kombu publish in the web worker and a consume, a task and a provider call
in the Celery worker: ~7 ms of CPU per write on this machine, competing with the requests for the same
cores. Here a write pushes its row id onto its tenant's pending list, and a drain task is sent only when none is
scheduled (a flag set with the push, in one script). The drain claims up to `limit` ids at a time and embeds them in
one provider call, so a burst of writes costs one task and a few batched calls. It runs EMBEDDING_DRAIN_DELAY_SECONDS
(0.1 s) after the write that scheduled it: sent at once, a drain found one or two rows under a steady write stream,
and every drain's task, provider call and transaction competed with the next requests for the cores (served
remember p95 8.18-10.24 ms with the delay, 9.63-11.91 without, 1,000 writes on one subject, alternated).

The flag lives FLAG_TTL_SECONDS (a few seconds) unless a running drain's `Heartbeat` renews it, every
HEARTBEAT_SECONDS from a thread, so a drain waiting on a slow provider keeps it while a dead one (its worker killed,
Redis frozen under it) stops blocking new drains within seconds. The price: a drain message that waits in a
backed-up queue longer than the TTL lets the next write send a second drain of the same tenant. That is harmless:
each drain claims into a list named after its own task id (the claim takes ids off the pending list atomically, so
no id is in two claims), embeds only rows still lacking a current vector, and the first to find the list empty
clears the flag.

Nothing is lost on a crash:
- A drain claims ids into a list named after its task id. A worker killed mid-batch leaves the claim; the broker
  redelivers the unacknowledged task (acks_late) with the same id, which finishes the claim before taking more.
- The flag is cleared by a drain that finds the pending list empty, atomically with that check, so a write either
  lands before the check (and is drained) or after it (and schedules a new drain). A flag that lapses instead (its
  drain died, or its message still waits) leaves the pending ids where they are: the next write's drain, or the late
  one, claims them all. A write made in the seconds between a drain's death and the lapse waits for the tenant's
  next write, or the sweep.
- A drain that Redis stops answering (a timeout, a reset connection) waits for it while the flag lives; when Redis
  answers, a retry of the task (same id: it finishes the claim) takes over, so the writes pushed meanwhile are
  drained, not left behind a flag nobody holds. If Redis answers only later, the flag has lapsed by then.
- A drain retrying a transient provider failure holds the flag for its countdown, so the writes meanwhile queue
  behind it instead of each sending a drain.
- A publish that fails clears the flag again, so the next write schedules the drain. A push that fails (Redis down)
  keeps its id in the process (`_Stranded`), sent with the tenant's next push that reaches Redis. Anything else
  that strands ids (a dropped queue, a lost message, a process restarted with ids it kept, a drain that gave up)
  leaves a row with no vector, which the embedding sweep embeds within its interval, as for a lost per-row task.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
import uuid
from types import TracebackType
from typing import Any

import redis
from django.conf import settings
from django.db import transaction

from loopmem.redis import outage
from loopmem.redis.client import redis_client
from loopmem.runtime import after_response, task_queue

logger = logging.getLogger(__name__)

FLAG_TTL_SECONDS = 5  # how long a drain that stopped renewing its flag (dead, frozen) blocks new ones
HEARTBEAT_SECONDS = 1.0  # a running drain renews the flag this often: four renewals may fail before it lapses
PENDING_TTL_SECONDS = 86_400  # ids nobody drains (Redis kept them, the broker lost the task) expire
CLAIM_TTL_SECONDS = 86_400
STRANDED_MAX_IDS = 10_000  # ids one process keeps for later while Redis is down; past that, the sweep's
REDIS_POLL_SECONDS = 0.25  # how often a drain Redis stopped answering asks again

# KEYS: pending, flag. ARGV: flag ttl, pending ttl, row ids. Returns 1 when the caller must send the drain task.
_PUSH = """
for i = 3, #ARGV do redis.call('RPUSH', KEYS[1], ARGV[i]) end  -- one by one: unpack() stops at ~8,000
redis.call('EXPIRE', KEYS[1], ARGV[2])
if redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[1]) then return 1 end
return 0
"""

# KEYS: pending, flag, claim. ARGV: limit, claim ttl. The ids to embed now: an unfinished claim first (a redelivered
# or retried task), else up to `limit` pending ids moved into the claim. None left: the flag is cleared.
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


def queue_for_embedding_after_commit(table: str, task_name: str, tenant_id: uuid.UUID, row_id: object) -> None:
    """Queue `row_id` for embedding once the transaction commits (after the response, inside a request), sending
    `task_name(tenant_id)` if no drain of the tenant's queue is scheduled. Never fails the write."""
    call = functools.partial(_push, table, task_name, str(tenant_id), str(row_id))
    transaction.on_commit(functools.partial(after_response.run_or_defer, call))


class _Stranded:
    """Ids of this process's pushes that did not reach Redis, by queue; they go with the queue's next push that does.

    Bounded by STRANDED_MAX_IDS; what is past it, or held by a process that stops, is the sweep's.
    """

    def __init__(self) -> None:
        self._ids: dict[tuple[str, str], list[str]] = {}
        self._count = 0
        self._lock = threading.Lock()  # threaded web workers push from several threads

    def keep(self, table: str, tenant_id: str, ids: list[str]) -> None:
        with self._lock:
            kept = ids[: max(STRANDED_MAX_IDS - self._count, 0)]
            if kept:
                self._ids.setdefault((table, tenant_id), []).extend(kept)
                self._count += len(kept)

    def take(self, table: str, tenant_id: str) -> list[str]:
        with self._lock:
            ids = self._ids.pop((table, tenant_id), [])
            self._count -= len(ids)
            return ids


_stranded = _Stranded()


def _push(table: str, task_name: str, tenant_id: str, row_id: str) -> None:
    ids = [*_stranded.take(table, tenant_id), row_id]
    if outage.is_down():
        logger.warning("redis down, %s %s not queued for embedding yet; kept for the tenant's next push", table, row_id)
        _stranded.keep(table, tenant_id, ids)
        return
    keys = Keys(table, tenant_id)
    try:
        schedule = _script(redis_client(), _PUSH)(
            keys=[keys.pending, keys.flag], args=[FLAG_TTL_SECONDS, PENDING_TTL_SECONDS, *ids]
        )
    except outage.REDIS_ERRORS as exc:
        outage.record_failure("embedding queue push", exc)
        logger.warning("could not queue %s %s for embedding yet; kept for the tenant's next push", table, row_id)
        _stranded.keep(table, tenant_id, ids)
        return
    if schedule and not task_queue.send_now(task_name, (tenant_id,), countdown=settings.EMBEDDING_DRAIN_DELAY_SECONDS):
        try:
            unschedule(table, tenant_id)  # the ids pushed so far go with the next write's drain
        except outage.REDIS_ERRORS as exc:
            outage.record_failure("embedding queue flag", exc)


def claim(table: str, tenant_id: uuid.UUID | str, claim_id: str, limit: int) -> list[str]:
    """The next ids for the drain `claim_id` to embed (its unfinished claim first); [] when the queue is empty,
    which also ends the drain's schedule. Raises redis.RedisError."""
    keys = Keys(table, tenant_id)
    ids = _script(redis_client(), _CLAIM)(
        keys=[keys.pending, keys.flag, keys.claim(claim_id)], args=[limit, CLAIM_TTL_SECONDS]
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


def hold(table: str, tenant_id: uuid.UUID | str, seconds: float) -> None:
    """Keep the tenant's schedule for `seconds` (the drain's retry is due by then), if it is still set."""
    redis_client().expire(Keys(table, tenant_id).flag, max(math.ceil(seconds), 1))


def release(table: str, tenant_id: uuid.UUID | str, claim_id: str) -> None:
    """The claim is done: its rows hold their vectors (or were left for the sweep)."""
    redis_client().delete(Keys(table, tenant_id).claim(claim_id))


def abandon(table: str, tenant_id: uuid.UUID | str, claim_id: str) -> None:
    """Give up on the tenant's queue (its provider fails for every text): drop the claim, the pending ids and the
    schedule. The rows keep no vector until the sweep embeds them; the next write starts a new drain."""
    keys = Keys(table, tenant_id)
    redis_client().delete(keys.claim(claim_id), keys.pending, keys.flag)


class Heartbeat:
    """While a drain runs, a thread renews its tenant's flag every HEARTBEAT_SECONDS (a provider call may take
    longer than the flag lives). `lapses_at` (time.monotonic()) is when the flag lapses if no renewal succeeds again.
    """

    def __init__(self, table: str, tenant_id: uuid.UUID | str) -> None:
        self._flag = Keys(table, tenant_id).flag
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="embedding-drain-heartbeat", daemon=True)
        # The push set the flag at most its TTL before now; a renewal by another drain would be that drain's to keep.
        self.lapses_at = time.monotonic() + FLAG_TTL_SECONDS

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """No renewal after this returns (a renewal in flight is waited for: at most one Redis timeout)."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                redis_client().expire(self._flag, FLAG_TTL_SECONDS)  # never creates the flag: a lapsed one stays so
            except outage.REDIS_ERRORS:
                pass  # the next beat tries again; the drain itself meets the outage on its next Redis call
            else:
                self.lapses_at = time.monotonic() + FLAG_TTL_SECONDS
            self._stopped.wait(HEARTBEAT_SECONDS)


def answers_before(deadline: float) -> bool:
    """Whether Redis answers a PING before `deadline` (time.monotonic()), asking every REDIS_POLL_SECONDS."""
    while time.monotonic() < deadline:
        try:
            redis_client().ping()
        except outage.REDIS_ERRORS:
            time.sleep(REDIS_POLL_SECONDS)
        else:
            return True
    return False


@functools.cache
def _script(client: redis.Redis, source: str) -> Any:
    # EVALSHA, loading the script on the first NOSCRIPT (a restarted Redis forgets scripts).
    return client.register_script(source)
