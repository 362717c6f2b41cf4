"""Two embedding batches that share rows (a drain and a backfill, the sweep or reembed) lock them in one order, so
neither can deadlock the other, whatever order each batch came in."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections

from loopmem.embedding import embedders
from loopmem.embedding.pipeline import embed_in_batches
from memory.embedding import MEMORY_EMBEDDINGS
from memory.models import Memory

pytestmark = pytest.mark.django_db(
    transaction=True, databases=["default", "heavy_read"], available_apps=["loopmem", "projects", "memory"]
)

# Long enough that the other batch takes its first row lock meanwhile (it starts at the same moment).
HOLD_SECONDS = 0.5


def test_batches_holding_the_same_rows_in_opposite_orders_both_commit(tenant):
    first, second = (Memory.objects.create(tenant=tenant, subject_id="agent", text=text) for text in ("one", "two"))
    hashing = embedders.HashingEmbedder()
    barrier = threading.Barrier(2)
    outcomes: list[object] = []

    def store_then_hold(row: Memory, vector: list[float], model_id: str) -> int:
        stored = MEMORY_EMBEDDINGS.store(row, vector, model_id)
        time.sleep(HOLD_SECONDS)  # inside the batch's transaction: the row's lock is held
        return stored

    def run(batch: list[Memory]) -> None:
        try:
            barrier.wait()
            outcomes.append(
                embed_in_batches(
                    tenant, [batch], text_of=MEMORY_EMBEDDINGS.text_of, store=store_then_hold,
                    embed=lambda texts: (hashing.embed(texts), "hashing:v1"),
                ).embedded
            )  # fmt: skip
        except Exception as exc:  # the outcome under test (a deadlock aborts one transaction)
            outcomes.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(batch,)) for batch in ([first, second], [second, first])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert outcomes == [2, 2]
    assert Memory.objects.filter(id__in=[first.id, second.id], embedding__isnull=False).count() == 2
