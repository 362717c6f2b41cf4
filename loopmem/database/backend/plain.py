"""Where a Django alias connects, as keyword arguments for a psycopg connection of one's own (benchmarks timing bare
SQL, tests that watch or terminate Django's backends)."""

from __future__ import annotations

from typing import Any

from django.db import connections


def plain_connection_params(alias: str) -> dict[str, Any]:
    """`psycopg.connect(**plain_connection_params(alias))` reaches the alias's database (its test database under
    pytest); empty settings are left out, so libpq's defaults apply as they do for Django."""
    db = connections[alias].settings_dict
    params = {
        "dbname": db["NAME"],
        "user": db["USER"],
        "password": db["PASSWORD"],
        "host": db["HOST"] or db["OPTIONS"].get("host"),
        "port": db["PORT"] or None,
    }
    return {name: value for name, value in params.items() if value}
