"""Memories as an embedded table: what a memory embeds (its text), how its vector is stored, and the names of the
tasks that embed it. The pipeline itself (drain, backfill, sweep, reembed) is loopmem.embedding.pipeline."""

from __future__ import annotations

from django.utils import timezone

from loopmem.embedding import embedders
from loopmem.embedding.pipeline import EmbeddedTable, embed_row
from memory.models import Memory

EMBED_MEMORY_TASK = "memory.tasks.embed_memory_task"
EMBED_PENDING_MEMORIES_TASK = "memory.tasks.embed_pending_memories_task"


def _store_vector(memory: Memory, vector: list[float], model_id: str) -> int:
    # A memory's text never changes (a correction is a new row), so the vector is stored unconditionally.
    return Memory.objects.filter(id=memory.id).update(
        embedding=vector,
        embedding_model=model_id,
        embedding_content_hash=embedders.content_hash(memory.text),
        updated_at=timezone.now(),
    )


MEMORY_EMBEDDINGS = EmbeddedTable(
    model=Memory, text_fields=("text",), text_of=lambda m: m.text, store=_store_vector, text_mutable=False
)


def memory_embed(*, memory_id: str) -> str:
    """Embed one memory ("embedded" | "unchanged" | "missing"); raises embedders.EmbeddingFailure."""
    return embed_row(MEMORY_EMBEDDINGS, memory_id)
