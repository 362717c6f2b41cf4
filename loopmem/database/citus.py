"""Distributing the schema on Citus by `tenant_id` (docs/scaling.md): the plan, read from the catalog, and the
rules Citus imposes, checkable on plain PostgreSQL.

Every table with a `tenant_id` column is distributed by it, colocated with `memories`, except the reference
tables (replicated to every node): `tenants`, `api_keys` (looked up by hash before any tenant is known) and
`projects` (small, joined to tenant rows). Django's own tables stay local to the coordinator.

On one node the keys stay as Django made them: a primary key on `id` (every Django ForeignKey needs a unique
`id` to point at). The distribution changes them, in order:

1. prepare (plain SQL): drop each foreign key between two distributed tables, and re-key each distributed
   table's primary key to `(tenant_id, id)`;
2. `create_reference_table` for the reference tables, `create_distributed_table` for the others (Citus);
3. finish (plain SQL): re-add those foreign keys as `(tenant_id, col) REFERENCES t (tenant_id, id)`, keeping
   their actions (`ON DELETE SET NULL (col)`, so the tenant column is never nulled).

Steps 1 and 3 run on plain PostgreSQL too; tests/citus applies them to the test database and checks the
result against `rule_violations`, the constraints Citus enforces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DISTRIBUTION_COLUMN = "tenant_id"
REFERENCE_TABLES = ("tenants", "api_keys", "projects")  # in dependency order: api_keys and projects → tenants
COLOCATION_ANCHOR = "memories"
_ACTIONS = {"a": "NO ACTION", "r": "RESTRICT", "c": "CASCADE", "n": "SET NULL", "d": "SET DEFAULT"}

# Statements the service runs across every tenant on purpose (sweeps, operator figures, metrics): multi-shard
# on Citus, each listed with why. Everything else pins one tenant (tests/citus/test_sql_routing.py).
MULTI_SHARD_STATEMENTS = {
    'SELECT DISTINCT "memories"."tenant_id" AS "tenant_id", "memories"."embedding_model"': (
        "embedding sweep (every 5 min): which tenants hold rows of which model, one index-only pass"
    ),
    'SELECT DISTINCT "articles"."tenant_id" AS "tenant_id", "articles"."embedding_model"': (
        "article embedding sweep (every 5 min): the same for articles"
    ),
    'SELECT "tenants"."id" AS "id" FROM "tenants" WHERE "tenants"."id" IN (SELECT U0."tenant_id" AS "tenant_id" FROM '
    '"memories" U0 WHERE (U0."graduated_at" IS NULL': (
        "graduation sweep (hourly): a random sample of the tenants with hot memories (ORDER BY random() LIMIT)"
    ),
    'SELECT DISTINCT "article_access_events"."tenant_id"': (
        "retrieval metrics (daily): tenants with ledger rows on the day"
    ),
    "WITH pending AS (\n    SELECT s.tenant_id, s.subject_id, s.session_id": (
        "promotion sweep (hourly): sessions with new turns; joins session_memories and session_promotions on "
        "tenant_id (colocated, pushed down per shard), windowed by tenant"
    ),
    "SELECT DISTINCT tenant_id FROM session_memories WHERE expires_at": (
        "session prune (hourly): tenants with expired turns, then one tenant at a time"
    ),
    'FROM "promotion_jobs" WHERE (("promotion_jobs"."state" = %s AND "promotion_jobs"."updated_at" < %s)': (
        "promotion sweep (hourly): jobs whose message was lost, re-enqueued"
    ),
    'SELECT COUNT(*) AS "__count" FROM "memories" WHERE "memories"."embedding" IS NULL': "metrics: embedding backlog",
    'SELECT COUNT(*) AS "__count" FROM "articles" WHERE "articles"."embedding" IS NULL': "metrics: embedding backlog",
    'SELECT "promotion_jobs"."state" AS "state", COUNT(': "metrics: promotion jobs by state",
}


@dataclass(frozen=True)
class ForeignKey:
    """A foreign key as the catalog describes it."""

    name: str
    table: str
    columns: tuple[str, ...]
    target: str
    target_columns: tuple[str, ...]
    on_delete: str  # pg_constraint.confdeltype
    deferrable: bool
    deferred: bool

    def composite_sql(self) -> str:
        """This key re-added as (tenant_id, col) → (tenant_id, id), its action kept on its own column only."""
        (column,) = self.columns
        action = _ACTIONS[self.on_delete]
        if action in ("SET NULL", "SET DEFAULT"):
            action = f'{action} ("{column}")'  # never null the tenant column (PostgreSQL ≥ 15)
        timing = " DEFERRABLE INITIALLY DEFERRED" if self.deferred else (" DEFERRABLE" if self.deferrable else "")
        return (
            f'ALTER TABLE "{self.table}" ADD CONSTRAINT "{self.name}" FOREIGN KEY ("{DISTRIBUTION_COLUMN}", '
            f'"{column}") REFERENCES "{self.target}" ("{DISTRIBUTION_COLUMN}", "id") ON DELETE {action}{timing}'
        )


@dataclass
class Plan:
    """The statements that distribute the schema, in order."""

    distributed: list[str]
    reference: list[str]
    prepare: list[str] = field(default_factory=list)
    citus: list[str] = field(default_factory=list)
    finish: list[str] = field(default_factory=list)

    def statements(self) -> list[str]:
        return [*self.prepare, *self.citus, *self.finish]


def tenant_tables(cursor: Any) -> list[str]:
    """Every table of the current schema with a tenant_id column, by name."""
    cursor.execute(
        "SELECT table_name FROM information_schema.columns WHERE column_name = %s AND table_schema = current_schema() "
        "ORDER BY table_name",
        [DISTRIBUTION_COLUMN],
    )
    return [row[0] for row in cursor.fetchall()]


def foreign_keys(cursor: Any) -> list[ForeignKey]:
    """Every foreign key of the current schema."""
    cursor.execute(
        """
        SELECT c.conname, src.relname, tgt.relname, c.confdeltype, c.condeferrable, c.condeferred,
               ARRAY(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, i)
                     JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i),
               ARRAY(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(n, i)
                     JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.i)
        FROM pg_constraint c
        JOIN pg_class src ON src.oid = c.conrelid
        JOIN pg_class tgt ON tgt.oid = c.confrelid
        JOIN pg_namespace ns ON ns.oid = src.relnamespace AND ns.nspname = current_schema()
        WHERE c.contype = 'f'
        ORDER BY src.relname, c.conname
        """
    )
    return [
        ForeignKey(name, table, tuple(cols), target, tuple(target_cols), on_delete, deferrable, deferred)
        for name, table, target, on_delete, deferrable, deferred, cols, target_cols in cursor.fetchall()
    ]


def plan(cursor: Any, *, done: frozenset[str] = frozenset()) -> Plan:
    """What distributing this database's schema takes, read from its catalog; tables in `done` are already
    distributed (or reference) tables. Re-planning after a run finds nothing left: keys already lead with
    tenant_id, foreign keys already pair it, tables already distributed."""
    distributed = [t for t in tenant_tables(cursor) if t not in REFERENCE_TABLES]
    reference = [t for t in REFERENCE_TABLES if _exists(cursor, t)]
    result = Plan(distributed=distributed, reference=reference)
    for fk in foreign_keys(cursor):
        if fk.table in distributed and fk.target in distributed and DISTRIBUTION_COLUMN not in fk.columns:
            result.prepare.append(f'ALTER TABLE "{fk.table}" DROP CONSTRAINT "{fk.name}"')
            result.finish.append(fk.composite_sql())
    for table in distributed:
        primary = _primary_key(cursor, table)
        if primary is not None and DISTRIBUTION_COLUMN not in primary[1]:
            result.prepare.append(f'ALTER TABLE "{table}" DROP CONSTRAINT "{primary[0]}"')
            result.prepare.append(f'ALTER TABLE "{table}" ADD PRIMARY KEY ("{DISTRIBUTION_COLUMN}", "id")')
    result.citus = [f"SELECT create_reference_table('{t}')" for t in reference if t not in done]
    anchor = COLOCATION_ANCHOR if COLOCATION_ANCHOR in distributed else (distributed[0] if distributed else "")
    # The anchor first (its own colocation group), then every other table colocated with it: joins and foreign
    # keys between them stay on one node, since one tenant's rows of every table live in the same shard group.
    for table in sorted(distributed, key=lambda t: t != anchor):
        if table in done:
            continue
        colocate = "none" if table == anchor else anchor
        result.citus.append(
            f"SELECT create_distributed_table('{table}', '{DISTRIBUTION_COLUMN}', colocate_with => '{colocate}')"
        )
    return result


def rule_violations(cursor: Any, *, distributed: list[str], reference: list[str]) -> list[str]:
    """What Citus would refuse in the current schema: a unique key of a distributed table without tenant_id,
    a foreign key between distributed tables that does not pair tenant_id with tenant_id, a foreign key from a
    reference or local table into a distributed one."""
    problems: list[str] = []
    cursor.execute(
        """
        SELECT t.relname, i.relname,
               ARRAY(SELECT a.attname FROM unnest(x.indkey) k(n) JOIN pg_attribute a
                     ON a.attrelid = x.indrelid AND a.attnum = k.n)
        FROM pg_index x
        JOIN pg_class t ON t.oid = x.indrelid
        JOIN pg_class i ON i.oid = x.indexrelid
        JOIN pg_namespace ns ON ns.oid = t.relnamespace AND ns.nspname = current_schema()
        WHERE x.indisunique
        """
    )
    for table, index, columns in cursor.fetchall():
        if table in distributed and DISTRIBUTION_COLUMN not in columns:
            problems.append(f"{table}: unique index {index} on {columns} lacks {DISTRIBUTION_COLUMN}")
    for fk in foreign_keys(cursor):
        if fk.target not in distributed:
            continue  # into a reference or local table: allowed
        if fk.table not in distributed:
            problems.append(f"{fk.table}: foreign key {fk.name} from a non-distributed table into {fk.target}")
            continue
        pairs = dict(zip(fk.columns, fk.target_columns, strict=True))
        if pairs.get(DISTRIBUTION_COLUMN) != DISTRIBUTION_COLUMN:
            problems.append(f"{fk.table}: foreign key {fk.name} to {fk.target} does not pair {DISTRIBUTION_COLUMN}")
    return problems


def distribute(connection: Any) -> list[str]:
    """Run the plan on a Citus coordinator; tables already distributed are left alone. Returns what ran."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE EXTENSION IF NOT EXISTS citus")
        cursor.execute("SELECT logicalrelid::regclass::text FROM pg_dist_partition")
        done = frozenset(row[0].strip('"') for row in cursor.fetchall())
        ran = plan(cursor, done=done).statements()
        for sql in ran:
            cursor.execute(sql)
    return ran


def _exists(cursor: Any, table: str) -> bool:
    cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [f'"{table}"'])
    row = cursor.fetchone()
    return bool(row and row[0])


def _primary_key(cursor: Any, table: str) -> tuple[str, list[str]] | None:
    cursor.execute(
        """
        SELECT c.conname, ARRAY(SELECT a.attname FROM unnest(c.conkey) k(n)
                                JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n)
        FROM pg_constraint c WHERE c.conrelid = %s::regclass AND c.contype = 'p'
        """,
        [f'"{table}"'],
    )
    row = cursor.fetchone()
    return (row[0], list(row[1])) if row else None
