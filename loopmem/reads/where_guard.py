"""The structural guard of every heavy read: the compiled WHERE tree must pin the scope, or the read is refused.

Not a convention: the guard reads the query Django compiled. A predicate counts only when it is an equality in an
AND chain (never under OR or NOT) on the table's own column, equal to the scope's value; subqueries are checked too.
SQL written over a guarded query's rows (`ScopedSession.values_over`) may name no table at all.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Iterator
from typing import Any

from django.apps import apps
from django.db.models.expressions import Col
from django.db.models.lookups import Exact
from django.db.models.sql import Query
from django.db.models.sql.where import AND, WhereNode


class UnscopedHeavyRead(AssertionError):
    """A heavy read without the conjunctive tenant/subject predicates: a programming error, never served."""


# --- The structural guard --------------------------------------------------------------------------------


def assert_scoped(query: Query, *, tenant_id: uuid.UUID, subject_id: str) -> None:
    """Raise UnscopedHeavyRead unless the outer query pins `subject_id` and every table pins `tenant_id`.

    A predicate counts only when it is an equality in an AND chain (never under OR or NOT), on the table's
    own column, equal to the scope's value. Subqueries are checked for the tenant recursively.
    """
    base_alias = query.get_initial_alias()
    if not _pins(query.where, base_alias, "subject_id", subject_id):
        raise UnscopedHeavyRead("heavy read refused: the outer query has no conjunctive subject_id for the scope")
    _assert_tenant_everywhere(query, tenant_id)


def _assert_tenant_everywhere(query: Query, tenant_id: uuid.UUID) -> None:
    if query.combinator or query.extra:
        # UNION/INTERSECT/EXCEPT parts and raw extra() SQL are outside what the guard can prove: refuse them.
        raise UnscopedHeavyRead("heavy read refused: combined queries and extra() SQL cannot be proven scoped")
    base_alias = query.get_initial_alias()
    for alias, table in query.alias_map.items():
        if alias != base_alias and not query.alias_refcount.get(alias):
            continue  # an alias the compiled SQL does not use
        if not _pins(query.where, alias, "tenant_id", tenant_id):
            raise UnscopedHeavyRead(f"heavy read refused: table {table.table_name} has no conjunctive tenant_id")
    for subquery in _subqueries(query):
        _assert_tenant_everywhere(subquery, tenant_id)


def _conjuncts(node: WhereNode) -> Iterator[Any]:
    if node.negated or (node.connector != AND and len(node.children) > 1):
        return
    for child in node.children:
        if isinstance(child, WhereNode):
            yield from _conjuncts(child)
        else:
            yield child


def _pins(where: WhereNode, alias: str, column: str, value: object) -> bool:
    for lookup in _conjuncts(where):
        if (
            isinstance(lookup, Exact)
            and isinstance(lookup.lhs, Col)
            and lookup.lhs.alias == alias
            and lookup.lhs.target.column == column
            and str(lookup.rhs) == str(value)
        ):
            return True
    return False


def _subqueries(query: Query) -> Iterator[Query]:
    order_by = [expression for expression in query.order_by if not isinstance(expression, str)]
    stack: list[Any] = [query.where, *query.annotations.values(), *order_by]
    while stack:
        node = stack.pop()
        if isinstance(node, Query):
            yield node
            continue
        inner = getattr(node, "query", None)  # Subquery / Exists wrap a Query
        if isinstance(inner, Query):
            yield inner
            continue
        if isinstance(node, WhereNode):
            stack.extend(node.children)
            continue
        rhs = getattr(node, "rhs", None)  # `id__in=<queryset>` puts a Query on the lookup's rhs
        if rhs is not None:
            stack.append(rhs)
        if hasattr(node, "get_source_expressions"):
            stack.extend(e for e in node.get_source_expressions() if e is not None)


def assert_tenant_scoped(query: Query, *, tenant_id: uuid.UUID) -> None:
    """Raise UnscopedHeavyRead unless every table of the query (subqueries included) pins `tenant_id`.

    For rows that belong to a tenant but to no subject. Which rows of the tenant a caller may see is the
    visibility predicate's job (`Article.objects.visible_to`); this guard makes a cross-tenant row impossible.
    """
    _assert_tenant_everywhere(query, tenant_id)


@functools.cache
def _table_names() -> frozenset[str]:
    return frozenset(model._meta.db_table.lower() for model in apps.get_models(include_auto_created=True))


@functools.cache
def assert_names_no_table(statement: str) -> None:
    """Raise UnscopedHeavyRead if SQL meant to read only a guarded query's rows (a CTE over it) names a table.

    Any identifier equal to a model's table counts, wherever it stands: a false alarm is a programming error to
    rename, a missed table would be a read outside the scope. Cached: the statements are the code's constants.
    """
    named = set(re.findall(r"[a-z_][a-z0-9_$]*", statement.lower())) & _table_names()
    if named:
        raise UnscopedHeavyRead(f"heavy read refused: the statement names table(s) {', '.join(sorted(named))}")
