"""The cache backend the limiter counts in: Django's RedisCache with a reused client and a one-trip incr."""

from __future__ import annotations

import pytest
from django.core.cache import cache


def _client():
    return cache._cache.get_client(write=True)  # type: ignore[attr-defined]


def test_incr_counts_up_and_keeps_the_expiry():
    cache.add("counter", 0, 30)
    assert [cache.incr("counter"), cache.incr("counter", 5)] == [1, 6]
    assert cache.get("counter") == 6
    assert 0 < _client().pttl(cache.make_key("counter")) <= 30_000


def test_incr_of_a_missing_key_raises_and_writes_nothing():
    with pytest.raises(ValueError, match="not found"):
        cache.incr("missing")
    assert not _client().exists(cache.make_key("missing"))


def test_a_restarted_redis_that_forgot_the_script_is_sent_it_again():
    cache.add("counter", 0, 30)
    cache.incr("counter")
    _client().script_flush()
    assert cache.incr("counter") == 2


def test_the_redis_client_is_built_once_and_reused():
    assert _client() is _client()
