"""The per-tenant in-flight cap of heavy reads: a Redis semaphore that sheds one tenant's burst, not everyone's."""

from __future__ import annotations

import contextlib
import functools
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import redis
from django.conf import settings
from django.core.cache import cache

from loopmem.errors import HeavyReadOverloaded
from loopmem.observability import metrics
from loopmem.redis import outage
from loopmem.redis.client import redis_client
from loopmem.runtime import after_response

# Admission in one round trip, atomically: expire slots a killed process left, refuse at the cap (without ever
# counting the refused read, so it cannot shed another), else take a slot.
_ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2]))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
    return 0
end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[3])
redis.call('EXPIRE', KEYS[1], math.floor(tonumber(ARGV[2])) + 1)
return 1
"""

_request_slots = threading.local()


def _held_slots() -> set[uuid.UUID]:
    held: set[uuid.UUID] | None = getattr(_request_slots, "tenants", None)
    if held is None:
        held = _request_slots.tenants = set()
    return held


@contextlib.contextmanager
def tenant_gate(tenant_id: uuid.UUID, *, count_shed: bool = True) -> Iterator[None]:
    """Admit at most HEAVY_READ_MAX_IN_FLIGHT concurrent heavy reads per tenant (a Redis semaphore).

    Entries expire after the statement timeout, so a killed process cannot hold a slot forever. Redis
    trouble fails open: shedding is protection, not a dependency. A slot already held by this thread for the tenant
    (`request_slot`, or an earlier read of the same request) admits the read: no Redis call. Otherwise one round trip
    to enter. Inside a web request the slot then belongs to the request until its response is sent: later reads of
    the request are admitted by it, and giving it back (the second round trip) waits until the client has its
    answer (loopmem.runtime.after_response). Outside a request it is given back when the block ends.
    """
    held = _held_slots()
    if tenant_id in held:
        yield
        return
    key = f"{cache.key_prefix}:heavy_read:{tenant_id}"
    token = secrets.token_hex(8)
    limit = settings.HEAVY_READ_MAX_IN_FLIGHT
    ttl = settings.HEAVY_READ_STATEMENT_TIMEOUT_MS / 1000 + 5
    # None: Redis is unreachable (or known to be), the read goes on ungated and there is no slot to give back.
    admitted = outage.call(
        "heavy-read gate",
        lambda: bool(_acquire_script(redis_client())(keys=[key], args=[time.time(), ttl, token, limit])),
        fallback=None,
    )
    if admitted is False:
        if count_shed:
            metrics.HEAVY_READ_REJECTIONS.inc()
        raise HeavyReadOverloaded(details={"in_flight_limit": limit})
    metrics.HEAVY_READ_ADMITTED.inc()

    def give_back() -> None:
        held.discard(tenant_id)
        outage.call("heavy-read gate", lambda: redis_client().zrem(key, token), fallback=None)

    if admitted and after_response.in_request():
        held.add(tenant_id)
        after_response.run_or_defer(give_back)
        yield
        return
    try:
        yield
    finally:
        if admitted:
            give_back()


@contextlib.contextmanager
def request_slot(tenant_id: uuid.UUID) -> Iterator[None]:
    """One gate slot for every heavy read of the block (merged recall reads its two halves under it).

    Half the gate's round trips of a block that reads twice, and it counts once against the cap. Inside a web
    request the gate already keeps a read's slot for the whole request; this makes the block's first read take it
    up front, and does the same for a block outside a request (a task). If the gate refuses, the block runs without
    a slot and each read asks the gate itself, degrading on its own as it would without this.
    """
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(tenant_gate(tenant_id, count_shed=False))
        except HeavyReadOverloaded:
            yield
            return
        held = _held_slots()
        mine = tenant_id not in held  # else the request holds the slot past this block
        held.add(tenant_id)
        try:
            yield
        finally:
            if mine:
                held.discard(tenant_id)


@functools.cache
def _acquire_script(client: redis.Redis) -> Any:
    # EVALSHA, loading the script on the first NOSCRIPT (a restarted Redis forgets scripts).
    return client.register_script(_ACQUIRE)
