"""Bookkeeping writes that commit without waiting for the disk (PostgreSQL's `synchronous_commit = off`).

A commit's wait for the WAL flush was p50 ~0.3 ms, p95 ~3.5 ms on the embedded PostgreSQL of the benchmark machine,
against ~0.06 / 0.15 ms asynchronously. Bookkeeping (the access ledger, a key's `last_used_at`) does not need it: a
crash of the database server may lose its last fraction of a second of such writes, never corrupt them, and never a
memory or an article. Only a transaction the bookkeeping opens itself is relaxed: in a caller's transaction SET LOCAL
would relax the caller's own writes too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.db import transaction


@contextlib.contextmanager
def bookkeeping_atomic() -> Iterator[None]:
    """An atomic block for bookkeeping: in a transaction of its own it commits without waiting for the disk; inside
    a caller's transaction it is a savepoint, and the caller's commit is left as it was."""
    own_transaction = not transaction.get_connection().in_atomic_block
    with transaction.atomic():
        if own_transaction:
            commit_without_waiting_for_the_disk()
        yield


def commit_without_waiting_for_the_disk() -> None:
    """Commit the current transaction asynchronously: visible at once, durable a moment later (this transaction
    only; call it first thing in an `atomic` block the caller opened for its bookkeeping alone)."""
    with transaction.get_connection().cursor() as cursor:
        cursor.execute("SET LOCAL synchronous_commit TO off")
