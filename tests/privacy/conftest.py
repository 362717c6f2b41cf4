"""Privacy test helpers: search the whole database and the whole of Redis for a marker."""

from __future__ import annotations

import base64
import json
from typing import Any

from django.db import connection

from loopmem.redis.client import redis_client

# Every column that can hold text: plain and varying text, JSON, arrays (tags), and the full-text search vector.
TEXT_TYPES = ("text", "character varying", "character", "json", "jsonb", "ARRAY", "tsvector")


def database_hits(marker: str) -> list[str]:
    """Every `table.column` of the database (read from information_schema) with a value containing `marker`."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND data_type = ANY(%s) ORDER BY table_name, column_name",
            [list(TEXT_TYPES)],
        )
        columns = cursor.fetchall()
        hits = []
        for table, column in columns:
            cursor.execute(
                f'SELECT count(*) FROM "{table}" WHERE "{column}"::text ILIKE %s',
                [f"%{marker}%"],
            )
            if cursor.fetchone()[0]:
                hits.append(f"{table}.{column}")
    assert len(columns) > 20  # the search read the schema: it would see a marker anywhere
    return hits


def _values(client: Any, key: bytes) -> list[bytes]:
    kind = client.type(key).decode()
    if kind == "string":
        return [client.get(key) or b""]
    if kind == "list":
        return list(client.lrange(key, 0, -1))
    if kind == "set":
        return list(client.smembers(key))
    if kind == "zset":
        return list(client.zrange(key, 0, -1))
    if kind == "hash":
        return [part for pair in client.hgetall(key).items() for part in pair]
    if kind == "stream":
        return [json.dumps(entry, default=str).encode() for entry in client.xrange(key)]
    return []


def _decoded(value: bytes) -> bytes:
    """A Celery message's body is base64 inside its JSON envelope: search the decoded body too."""
    try:
        message = json.loads(value)
        if isinstance(message, dict) and isinstance(message.get("body"), str):
            return value + base64.b64decode(message["body"])
    except (ValueError, TypeError):
        pass
    return value


def redis_hits(marker: str) -> list[str]:
    """Every Redis key (SCAN over all of them) whose name or value contains `marker`."""
    client = redis_client()
    needle = marker.encode()
    hits = []
    for key in client.scan_iter(count=1000):
        if needle in key or any(needle in _decoded(value) for value in _values(client, key)):
            hits.append(key.decode(errors="replace"))
    return hits
