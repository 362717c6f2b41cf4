"""Quota exactness: writers racing at the cap never exceed it (advisory lock, real connections)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction
from django.test import override_settings

from loopmem.errors import QuotaExceeded
from loopmem.tenancy.scope import Scope
from memory.models import Memory
from memory.services import memory_remember
from memory.writer import lock_subject_quota_and_count_live

WRITERS = 8
ATTEMPTS_EACH = 3
QUOTA = 10


@pytest.mark.django_db(transaction=True)
@override_settings(MEMORY_QUOTA=QUOTA)
def test_concurrent_writers_at_the_cap_never_exceed_it(tenant):
    scope = Scope(tenant_id=tenant.id, subject_id="racer")
    for n in range(QUOTA - 3):
        memory_remember(scope=scope, text=f"pre {n}")
    barrier = threading.Barrier(WRITERS)
    outcomes: list[str] = []
    lock = threading.Lock()

    def writer(n: int) -> None:
        try:
            barrier.wait()
            for attempt in range(ATTEMPTS_EACH):
                try:
                    memory_remember(scope=scope, text=f"w{n}-{attempt}")
                    result = "ok"
                except QuotaExceeded:
                    result = "quota"
                with lock:
                    outcomes.append(result)
        finally:
            connection.close()  # each thread has its own connection

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(outcomes) == WRITERS * ATTEMPTS_EACH
    assert outcomes.count("ok") == 3
    assert Memory.objects.filter(subject_id="racer", superseded_by__isnull=True).count() == QUOTA


@pytest.mark.django_db(transaction=True)
def test_the_quota_count_sees_a_row_committed_while_it_waited_for_the_lock(tenant):
    # One round trip locks and counts; the count must still be taken after the lock is granted, or two writers at
    # the cap could both pass it. The first writer holds the lock with one more row; the second asks meanwhile.
    scope = Scope(tenant_id=tenant.id, subject_id="waiter")
    memory_remember(scope=scope, text="before")
    holding, counted = threading.Event(), []

    def first_writer() -> None:
        try:
            with transaction.atomic():
                lock_subject_quota_and_count_live(scope)
                Memory.objects.create(tenant_id=tenant.id, subject_id="waiter", text="written under the lock")
                holding.set()
                time.sleep(0.5)  # the second writer is now waiting on the lock
        finally:
            connection.close()

    def second_writer() -> None:
        try:
            holding.wait(timeout=10)
            with transaction.atomic():
                counted.append(lock_subject_quota_and_count_live(scope))
        finally:
            connection.close()

    threads = [threading.Thread(target=first_writer), threading.Thread(target=second_writer)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert counted == [2]


@pytest.mark.django_db
def test_the_quota_count_is_the_subjects_live_rows(tenant, other_tenant):
    scope = Scope(tenant_id=tenant.id, subject_id="counted")
    old = memory_remember(scope=scope, text="old")
    memory_remember(scope=scope, text="kept")
    new = memory_remember(scope=scope, text="new")
    Memory.objects.filter(id=old.id).update(superseded_by=new)  # superseded: not live
    memory_remember(scope=Scope(tenant_id=tenant.id, subject_id="someone else"), text="theirs")
    memory_remember(scope=Scope(tenant_id=other_tenant.id, subject_id="counted"), text="another tenant's")
    with transaction.atomic():
        assert lock_subject_quota_and_count_live(scope) == Memory.objects.for_scope(scope).live().count() == 2
