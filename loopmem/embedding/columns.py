"""The columns of an embedded table, declared once: every table the pipeline embeds (memories, articles) inherits
them from `EmbeddedColumns`, and `pipeline.EmbeddedTable` accepts only such a model.

An abstract model: it adds no table and no migration; each concrete table keeps its own indexes (the partial HNSW
indexes of `vector_index` and a `(tenant, embedding_model)` index for the sweep), named after the table.
"""

from __future__ import annotations

import uuid

from django.db import models
from pgvector.django import HalfVectorField


class EmbeddedColumns(models.Model):
    """A row's id (what the embedding queue holds), its vector, the model that made it and the hash of the text it
    embeds; and the same three for a reembed."""

    # Declared here, not by each table, so that it stays the first column the ORM selects (parents' fields come first).
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Untyped: each vector at its model's native size (loopmem.embedding.vector_index indexes each supported size).
    # Half precision (2 bytes a component): half the heap and half the index of float32, and a cosine that moves by
    # about 1e-4, far below what separates two memories (docs/scaling.md, "Bytes per memory").
    embedding = HalfVectorField(null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True, default="")
    embedding_content_hash = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001  (NULL: not embedded)
    # A reembed in progress (loopmem.embedding.pipeline.reembed_pending): the target model's vector waits here, beside
    # the one recall still reads, until every row has one and one transaction swaps them (`reembed_swap`).
    pending_embedding = HalfVectorField(null=True, blank=True)
    pending_embedding_model = models.CharField(max_length=200, blank=True, default="", db_default="")  # raw COPY too
    pending_embedding_content_hash = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001

    class Meta:
        abstract = True
