"""The limiter's counters on the real Redis: both windows, their expiry, atomicity, failing open."""

from __future__ import annotations

import threading
import uuid
from typing import TypedDict

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import override_settings

from loopmem.http import ratelimit
from loopmem.http.ratelimit import count_request
from loopmem.redis import cache_backend, outage

# django-ratelimit's clock held still (tests/loopmem/conftest.py).
pytestmark = pytest.mark.usefixtures("clock")


class Ids(TypedDict):
    key_id: str
    tenant_id: str


def _ids() -> Ids:
    return {"key_id": str(uuid.uuid4()), "tenant_id": str(uuid.uuid4())}


def _counters() -> list[str]:
    prefix = settings.CACHES["default"]["KEY_PREFIX"]
    client = cache._cache.get_client(write=True)  # type: ignore[attr-defined]
    return sorted(name.decode() for name in client.scan_iter(match=f"{prefix}:*:{settings.RATELIMIT_CACHE_PREFIX}*"))


def test_one_call_counts_the_key_and_the_tenant():
    ids = _ids()
    first = count_request(**ids, key_limit=5, tenant_limit=15)
    second = count_request(**ids, key_limit=5, tenant_limit=15)
    assert first is not None
    assert second is not None
    assert (first.key.count, first.tenant.count, second.key.count, second.tenant.count) == (1, 1, 2, 2)
    assert 1 <= first.key.reset_seconds <= 60
    assert 1 <= first.tenant.reset_seconds <= 60
    assert (second.key.limit, second.tenant.limit) == (5, 15)


def test_the_key_limit_and_the_tenant_limit_trip_on_their_own():
    tenant_id = str(uuid.uuid4())
    first_key, second_key = str(uuid.uuid4()), str(uuid.uuid4())
    limits = {"key_limit": 2, "tenant_limit": 3}
    counted = [count_request(key_id=first_key, tenant_id=tenant_id, **limits) for _ in range(3)]
    assert [(c.key.exceeded, c.tenant.exceeded) for c in counted if c] == [(False, False)] * 2 + [(True, False)]
    other = count_request(key_id=second_key, tenant_id=tenant_id, **limits)
    assert other is not None
    assert (other.key.count, other.key.exceeded, other.tenant.count, other.tenant.exceeded) == (1, False, 4, True)


def test_the_counters_are_cache_entries_that_expire_soon_after_their_window():
    ids = _ids()
    count_request(**ids, key_limit=5, tenant_limit=15, window_seconds=30)
    names = _counters()
    assert len(names) == 2
    client = cache._cache.get_client(write=True)  # type: ignore[attr-defined]
    # django-ratelimit keeps a counter 5 s past its window.
    assert all(0 < client.pttl(name) <= 35_000 for name in names)
    cache.clear()  # what every test's fixture does between tests
    again = count_request(**ids, key_limit=5, tenant_limit=15)
    assert again is not None
    assert (again.key.count, again.tenant.count) == (1, 1)


def test_the_next_window_starts_the_counts_over(clock):
    ids = _ids()
    counted = [count_request(**ids, key_limit=2, tenant_limit=6, window_seconds=5) for _ in range(3)]
    last = counted[-1]
    assert last is not None
    assert (last.key.count, last.key.exceeded) == (3, True)
    clock.advance(max(last.key.reset_seconds, last.tenant.reset_seconds))
    fresh = count_request(**ids, key_limit=2, tenant_limit=6, window_seconds=5)
    assert fresh is not None
    assert (fresh.key.count, fresh.key.exceeded, fresh.tenant.count) == (1, False, 1)


def test_the_time_left_counts_down_and_later_requests_do_not_extend_the_window(clock):
    ids = _ids()
    first = count_request(**ids, key_limit=5, tenant_limit=15, window_seconds=5)
    assert first is not None
    clock.advance(first.key.reset_seconds)  # the first moment of the key's next window
    opened = count_request(**ids, key_limit=5, tenant_limit=15, window_seconds=5)
    clock.advance(1.2)
    later = count_request(**ids, key_limit=5, tenant_limit=15, window_seconds=5)
    assert opened is not None
    assert later is not None
    assert (opened.key.count, opened.key.reset_seconds) == (1, 5)
    assert (later.key.count, later.key.reset_seconds) == (2, 4)
    assert 1 <= later.tenant.reset_seconds <= 5


def test_concurrent_requests_are_admitted_exactly_up_to_the_limit():
    ids = _ids()
    threads, calls_each, limit = 12, 10, 37
    start = threading.Barrier(threads)
    results: list[ratelimit.RequestCounts | None] = []
    lock = threading.Lock()

    def hammer() -> None:
        start.wait()
        for _ in range(calls_each):
            counted = count_request(**ids, key_limit=limit, tenant_limit=limit * 3)
            with lock:
                results.append(counted)

    workers = [threading.Thread(target=hammer) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert None not in results
    counts = sorted(c.key.count for c in results if c)
    assert counts == list(range(1, threads * calls_each + 1))  # every increment seen once: no lost updates
    assert sum(1 for c in results if c and not c.key.exceeded) == limit


def test_an_unreachable_redis_fails_open_and_the_latch_spares_the_next_calls(tmp_path, caplog):
    dead = {
        "default": {
            **settings.CACHES["default"],
            "LOCATION": f"unix://{tmp_path}/nothing-here.sock",
        }
    }
    with override_settings(CACHES=dead):
        assert count_request(**_ids(), key_limit=5, tenant_limit=15) is None
        assert outage.is_down()
    assert "rate limiter failing open: redis unreachable" in caplog.text
    # While the latch is open the limiter does not try Redis, even a healthy one.
    assert count_request(**_ids(), key_limit=5, tenant_limit=15) is None
    outage.reset()
    assert count_request(**_ids(), key_limit=5, tenant_limit=15) is not None


def test_a_counter_lost_between_its_add_and_its_incr_admits_the_request(monkeypatch):
    ids = _ids()
    count_request(**ids, key_limit=5, tenant_limit=15)  # both counters exist: the next call increments them
    cache.clear()  # ... as the cache loses them

    def add_without_writing(self, key, value, timeout):
        return False

    monkeypatch.setattr(cache_backend.RedisCacheClient, "add", add_without_writing)
    assert count_request(**ids, key_limit=5, tenant_limit=15) is None
    assert not outage.is_down()  # not an outage: nothing latched
