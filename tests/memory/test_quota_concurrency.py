"""Quota exactness: writers racing at the cap never exceed it (advisory lock, real connections)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.test import override_settings

from loopmem.errors import QuotaExceeded
from loopmem.scope import Scope
from memory.models import Memory
from memory.services import memory_remember

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
