"""The limiter's counters on the real Redis: both windows in one script, their expiry, atomicity, failing open."""

from __future__ import annotations

import threading
import time
import uuid
from typing import TypedDict

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import override_settings

from loopmem import ratelimit, redis_outage
from loopmem.ratelimit import count_request


class Ids(TypedDict):
    key_id: str
    tenant_id: str


def _ids() -> Ids:
    return {"key_id": str(uuid.uuid4()), "tenant_id": str(uuid.uuid4())}


def _redis():
    client, _prefix = ratelimit._cache_redis()
    return client


def test_one_call_counts_the_key_and_the_tenant_and_reports_a_full_window():
    ids = _ids()
    first = count_request(**ids, key_limit=5, tenant_limit=15)
    second = count_request(**ids, key_limit=5, tenant_limit=15)
    assert first is not None
    assert second is not None
    assert (first.key.count, first.tenant.count, second.key.count, second.tenant.count) == (1, 1, 2, 2)
    assert (first.key.reset_seconds, first.tenant.reset_seconds) == (60, 60)
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


def test_the_counters_are_cache_entries_with_the_window_as_expiry():
    ids = _ids()
    count_request(**ids, key_limit=5, tenant_limit=15, window_seconds=30)
    prefix = settings.CACHES["default"]["KEY_PREFIX"]
    names = sorted(name.decode() for name in _redis().scan_iter(match=f"{prefix}:ratelimit:*"))
    assert names == [
        f"{prefix}:ratelimit:{{{ids['tenant_id']}}}:key:{ids['key_id']}",
        f"{prefix}:ratelimit:{{{ids['tenant_id']}}}:tenant",
    ]
    assert all(0 < _redis().pttl(name) <= 30_000 for name in names)
    cache.clear()  # what every test's fixture does between tests
    again = count_request(**ids, key_limit=5, tenant_limit=15)
    assert again is not None
    assert (again.key.count, again.tenant.count) == (1, 1)


def test_the_counters_expire_with_their_window():
    ids = _ids()
    for _ in range(3):
        count_request(**ids, key_limit=2, tenant_limit=6, window_seconds=0.3)
    time.sleep(0.4)
    fresh = count_request(**ids, key_limit=2, tenant_limit=6, window_seconds=0.3)
    assert fresh is not None
    assert (fresh.key.count, fresh.key.exceeded, fresh.tenant.count) == (1, False, 1)


def test_the_time_left_counts_down_and_later_requests_do_not_extend_the_window():
    ids = _ids()
    opened = count_request(**ids, key_limit=5, tenant_limit=15, window_seconds=5)
    time.sleep(1.1)
    later = count_request(**ids, key_limit=5, tenant_limit=15, window_seconds=5)
    assert opened is not None
    assert later is not None
    assert opened.key.reset_seconds == 5
    assert later.key.count == 2
    assert 1 <= later.key.reset_seconds <= 4
    assert 1 <= later.tenant.reset_seconds <= 4


def test_a_counter_left_without_expiry_gets_one():
    # A counter must never outlive its window: one found without an expiry (written by hand, a restored dump) gets it.
    ids = _ids()
    prefix = settings.CACHES["default"]["KEY_PREFIX"]
    key_counter = f"{prefix}:ratelimit:{{{ids['tenant_id']}}}:key:{ids['key_id']}"
    _redis().set(key_counter, 7)
    counted = count_request(**ids, key_limit=5, tenant_limit=15, window_seconds=10)
    assert counted is not None
    assert (counted.key.count, counted.key.exceeded, counted.key.reset_seconds) == (8, True, 10)
    assert 0 < _redis().pttl(key_counter) <= 10_000


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


def test_a_restarted_redis_that_forgot_the_script_is_sent_it_again():
    ids = _ids()
    count_request(**ids, key_limit=5, tenant_limit=15)
    _redis().script_flush()
    counted = count_request(**ids, key_limit=5, tenant_limit=15)
    assert counted is not None
    assert counted.key.count == 2


def test_an_unreachable_redis_fails_open_and_the_latch_spares_the_next_calls(tmp_path, caplog):
    dead = {
        "default": {
            **settings.CACHES["default"],
            "LOCATION": f"unix://{tmp_path}/nothing-here.sock",
        }
    }
    with override_settings(CACHES=dead):
        assert count_request(**_ids(), key_limit=5, tenant_limit=15) is None
        assert redis_outage.is_down()
    assert "rate limiter failing open: redis unreachable" in caplog.text
    # While the latch is open the limiter does not try Redis, even a healthy one.
    assert count_request(**_ids(), key_limit=5, tenant_limit=15) is None
    redis_outage.reset()
    assert count_request(**_ids(), key_limit=5, tenant_limit=15) is not None


@pytest.mark.parametrize(
    ("location", "server"),
    [
        ("unix:///run/a.sock?db=0", "unix:///run/a.sock?db=0"),
        ("redis://primary:6379/0,redis://replica:6379/0", "redis://primary:6379/0"),
        (["redis://primary:6379/0", "redis://replica:6379/0"], "redis://primary:6379/0"),
    ],
)
def test_the_counters_go_to_the_server_the_cache_writes_to(location, server):
    assert ratelimit._write_server(location) == server
