"""The Django cache backend: Django's RedisCache with a reused client and a one-round-trip `incr`.

django-ratelimit (loopmem.http.ratelimit) counts each window with the cache's `add` (one `SET NX EX`) and then its
`incr`, and both ask the cache for a client. Two departures from Django's client, both for that path:

- `get_client` reuses one redis-py client per connection pool. Django builds a new `redis.Redis` on every call,
  and building one (its table of response callbacks) costs more than the round trip it then makes.
- `incr` is one short Lua script that increments only a key that exists. Django's asks `EXISTS` and then sends
  `INCRBY`: two round trips, and a key that expires between them is recreated without an expiry.

Everything else, `incr`'s contract included (`ValueError` for a missing key), is Django's.
"""

from __future__ import annotations

from typing import Any

import redis
from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient as DjangoRedisCacheClient
from redis.commands.core import Script

_INCR_IF_EXISTS = """
if redis.call('EXISTS', KEYS[1]) == 1 then
    return redis.call('INCRBY', KEYS[1], ARGV[1])
end
return false
"""


class RedisCacheClient(DjangoRedisCacheClient):
    """Django's client with one redis-py client per pool and a one-round-trip `incr`."""

    def __init__(self, servers: list[str], **options: Any) -> None:
        super().__init__(servers, **options)
        # Keyed by the pool's id: a pool lives as long as this object, which holds it.
        self._clients: dict[int, redis.Redis] = {}
        self._incr_script: Script | None = None

    def get_client(self, key: Any = None, *, write: bool = False) -> redis.Redis:
        # django-stubs leave out the helpers Django's own get_client is made of.
        pool = self._get_connection_pool(write)  # type: ignore[attr-defined]
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)  # type: ignore[attr-defined]
        return client

    def incr(self, key: Any, delta: int) -> int:
        client = self.get_client(key, write=True)
        if self._incr_script is None:
            self._incr_script = client.register_script(_INCR_IF_EXISTS)
        # EVALSHA; a Redis that forgot the script (restarted) is sent it again on its NOSCRIPT.
        value = self._incr_script(keys=[key], args=[delta], client=client)
        if value is None:
            raise ValueError(f"Key '{key}' not found.")
        return int(value)


class RedisCache(DjangoRedisCache):
    """Django's RedisCache over `RedisCacheClient`."""

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = RedisCacheClient
