"""Vectors at their model's native size in one untyped `halfvec` column, and the partial HNSW indexes over it.

pgvector can index only a typed column, so an untyped one is indexed the way its docs show for mixed sizes: one
expression index per supported size, `(embedding::halfvec(N))`, partial on `vector_dims(embedding) = N`. Half
precision throughout: the column and its indexes take half the bytes of `vector`, and 3072 dimensions (over
`vector`'s 2,000-dimension HNSW limit, within `halfvec`'s 4,000) are indexable.

A read that wants the index must say the same expression and the same predicate (`ann_distance`,
`same_dimensions`): the planner matches an expression index only on the identical expression, and a partial
index only when the query's WHERE implies its predicate. A model of another size is still read, exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.postgres.indexes import OpClass
from django.db import models
from django.db.models import F, Func, IntegerField, Q
from django.db.models.functions import Cast
from django.db.models.lookups import Exact
from pgvector.django import CosineDistance, HalfVectorField, HnswIndex

# The sizes an HNSW index exists for: MiniLM/bge-small (384), bge-base/nomic (768), bge-large/mxbai (1024),
# text-embedding-3-small and ada-002 (1536), text-embedding-3-large (3072).
INDEXED_DIMENSIONS: tuple[int, ...] = (384, 768, 1024, 1536, 3072)
COLUMN = "embedding"


def vector_dims(column: str = COLUMN) -> Func:
    """`vector_dims(column)`: the stored vector's size."""
    return Func(F(column), function="vector_dims", output_field=IntegerField())


def same_dimensions(dimensions: int, column: str = COLUMN) -> Q:
    """Rows whose vector has `dimensions` components: the partial indexes' predicate, and what keeps vectors of two
    sizes from ever being compared (pgvector raises on it)."""
    return Q(Exact(vector_dims(column), dimensions))


def is_indexed(dimensions: int) -> bool:
    return dimensions in INDEXED_DIMENSIONS


def indexed_expression(dimensions: int, column: str = COLUMN) -> Cast:
    """The expression the index of this size holds: `column::halfvec(N)`."""
    return Cast(column, output_field=_field(dimensions))


def ann_distance(vector: Sequence[float], column: str = COLUMN) -> CosineDistance:
    """The cosine distance the HNSW index of the vector's size can serve (the same expression as the index)."""
    return CosineDistance(indexed_expression(len(vector), column), list(vector))


def exact_distance(vector: Sequence[float], column: str = COLUMN) -> CosineDistance:
    """Cosine distance on the stored vector (no cast: no index matches it)."""
    return CosineDistance(column, list(vector))


def hnsw_indexes(table: str, condition: Q) -> list[HnswIndex]:
    """One partial HNSW index per supported size over `condition`'s rows: `<table>_hnsw_<N>_idx`."""
    indexes = []
    for dimensions in INDEXED_DIMENSIONS:
        indexes.append(
            HnswIndex(
                OpClass(indexed_expression(dimensions), name="halfvec_cosine_ops"),
                name=f"{table}_hnsw_{dimensions}_idx",
                m=16,
                ef_construction=64,
                condition=condition & same_dimensions(dimensions),
            )
        )
    return indexes


def _field(dimensions: int) -> models.Field[object, object]:
    return HalfVectorField(dimensions=dimensions)


# --- The migration from one padded column (vector(LOOPMEM_EMBEDDING_DIMENSIONS)) to native sizes -------------

# Providers whose every model makes 384-dim vectors, whatever model name a tenant set: their stored vectors were
# zero-padded and are shrunk back. Other models' rows keep their stored size (nothing says what their native one is).
NATIVE_384_PROVIDERS = ("local", "hashing")


def shrink_padded_sql(table: str) -> str:
    """Cut the zero padding off the vectors of 384-dim providers: `subvector(embedding, 1, 384)`.

    Only rows whose tail is all zeros are touched, so a vector that was never padded cannot be cut.
    """
    providers = " OR ".join(f"embedding_model LIKE '{provider}:%'" for provider in NATIVE_384_PROVIDERS)
    return (
        f"UPDATE {table} SET embedding = subvector(embedding, 1, 384) "
        f"WHERE embedding IS NOT NULL AND vector_dims(embedding) > 384 AND ({providers}) "
        f"AND vector_norm(subvector(embedding, 385, vector_dims(embedding) - 384)) = 0"
    )


def pad_back_sql(table: str, dimensions: int) -> str:
    """The reverse: zero-pad every shorter vector to the old fixed column size."""
    return (
        f"UPDATE {table} SET embedding = (embedding::real[] || array_fill(0::real, "
        f"ARRAY[{dimensions} - vector_dims(embedding)]))::vector "
        f"WHERE embedding IS NOT NULL AND vector_dims(embedding) < {dimensions}"
    )
