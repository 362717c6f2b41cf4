"""Captures the SQL that HTTP requests issue (test client requests, both database aliases) and checks routing."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

from django.core.signals import request_finished, request_started
from django.db import connections

from tests.sql_routing import REFERENCE_TABLES, Unrouted, unrouted

# No API request runs a multi-shard statement: a superadmin acts inside one impersonated tenant. The service's
# cross-tenant statements (sweeps, operator figures, metrics) are listed in
# loopmem.database.citus.MULTI_SHARD_STATEMENTS.
MULTI_SHARD_ALLOWED: dict[str, str] = {}


class Capture:
    def __init__(self) -> None:
        self.active = False
        self.statements: list[str] = []

    def wrapper(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        if self.active:
            self.statements.append(sql)
        return execute(sql, params, many, context)

    def start(self, **_: Any) -> None:
        self.active = True

    def stop(self, **_: Any) -> None:
        self.active = False

    def violations(self) -> list[Unrouted]:
        if not self.statements:
            return []  # a test without the database (and so without tenant tables to route)
        tables = tenant_tables()
        found = [v for sql in self.statements for v in unrouted(sql, tables)]
        return [v for v in found if not any(marker in v.sql for marker in MULTI_SHARD_ALLOWED)]

    def assert_routable(self) -> None:
        found = self.violations()
        if os.environ.get("LOOPMEM_SQL_ROUTING_REPORT"):
            with open(os.environ["LOOPMEM_SQL_ROUTING_REPORT"], "a") as report:
                for v in found:
                    report.write(f"{v.table}\t{v.sql}\n")
            return
        assert not found, "statements Citus cannot route to one tenant's shard:\n" + "\n".join(
            f"[{v.table}] {v.sql}" for v in found
        )


_TENANT_TABLES: frozenset[str] | None = None


def tenant_tables() -> frozenset[str]:
    """Every table with a tenant_id column that is not a reference table (read once from the catalog)."""
    global _TENANT_TABLES
    if _TENANT_TABLES is None:
        with connections["default"].cursor() as cursor:
            cursor.execute(
                "SELECT table_name FROM information_schema.columns WHERE column_name = 'tenant_id' "
                "AND table_schema = current_schema()"
            )
            _TENANT_TABLES = frozenset(row[0] for row in cursor.fetchall()) - REFERENCE_TABLES
    return _TENANT_TABLES


@contextlib.contextmanager
def capture_request_statements() -> Iterator[Capture]:
    capture = Capture()
    request_started.connect(capture.start)
    request_finished.connect(capture.stop)
    try:
        with contextlib.ExitStack() as stack:
            for alias in ("default", "heavy_read"):
                stack.enter_context(connections[alias].execute_wrapper(capture.wrapper))
            yield capture
    finally:
        request_started.disconnect(capture.start)
        request_finished.disconnect(capture.stop)
