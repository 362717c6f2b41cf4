"""Which SQL statements Citus could route to one shard: every tenant table they touch is pinned by an equality
on its own `tenant_id` (`"memories"."tenant_id" = %s`, `U0."tenant_id" = %s`), or, for an INSERT, the tenant_id
column is among the inserted ones. Reference tables (replicated to every node) need no predicate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from loopmem.database import citus

# Replicated to every node (docs/scaling.md): looked up before a tenant is known (API keys by hash, tenants by
# slug) or small and read with tenant rows (projects).
REFERENCE_TABLES = frozenset(citus.REFERENCE_TABLES)

_TABLE_REF = re.compile(
    r'(FROM|JOIN|UPDATE|INTO)\s+"?(?P<table>\w+)"?(?:\s+(?:AS\s+)?(?P<alias>[A-Z]\d+)\b)?', re.IGNORECASE
)


@dataclass(frozen=True)
class Unrouted:
    """A statement that touches a tenant table without pinning it to one tenant."""

    table: str
    sql: str


def unrouted(sql: str, tenant_tables: frozenset[str]) -> list[Unrouted]:
    """The tenant tables `sql` touches without a tenant_id equality of their own."""
    found: list[Unrouted] = []
    statement = sql.lstrip()
    for match in _TABLE_REF.finditer(statement):
        table, alias = match.group("table"), match.group("alias")
        if table not in tenant_tables:
            continue
        if match.group(1).upper() == "INTO":
            columns = statement[match.end() : statement.find(")", match.end()) + 1]
            if "tenant_id" not in columns:
                found.append(Unrouted(table, sql))
            continue
        names = [f'"{table}"', table, alias] if alias else [f'"{table}"', table]
        pinned = any(re.search(rf'(?<![\w"]){re.escape(name)}\."?tenant_id"? = ', statement) for name in names)
        # UPDATE/DELETE of one table may name the column unqualified.
        if (
            not pinned
            and match.group(1).upper() in ("UPDATE", "FROM")
            and statement[:6].upper() in ("UPDATE", "DELETE")
        ):
            pinned = re.search(r'(?<![.\w"])"?tenant_id"? = ', statement) is not None
        if not pinned:
            found.append(Unrouted(table, sql))
    return found
