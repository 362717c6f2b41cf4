"""An article's stored vector as read for comparing articles with each other (the diversity selector), in binary."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from django.db.models import BinaryField, Func, QuerySet
from numpy.typing import NDArray

from knowledge.diversity import Vector
from knowledge.models import Article


class VectorSend(Func):
    """A halfvec column as its binary wire format (`halfvec_send`: int16 dims, int16 unused, big-endian float16s).

    Read as text, a 1536-dim vector is ~12 KB of decimals that pgvector's Django field parses one float at a time
    in Python: 30 candidate articles cost ~20 ms a merged recall. As bytea it is decoded by psycopg and numpy.
    """

    function = "halfvec_send"
    output_field = BinaryField()


def vector_from_send(raw: bytes | memoryview) -> NDArray[np.float64]:
    """The float16 values `halfvec_send` wrote, exactly, as float64."""
    return np.frombuffer(raw, dtype=">f2", offset=4).astype(np.float64)


@dataclass(frozen=True)
class ArticleVector:
    vector: Vector | None
    content_hash: str | None


def with_vectors(rows: QuerySet[Article]) -> QuerySet[Article]:
    """`rows` each carrying its stored vector as `vector_bytes` (binary, see VectorSend), for `article_vector`."""
    return rows.annotate(vector_bytes=VectorSend("embedding"))


def article_vector(article: Article, *, model_id: str | None = None) -> ArticleVector:
    """The vector and content hash of an article read `with_vectors`, for the merged recall's diversity selection.

    With `model_id`, a vector of another model is withheld (None): vectors of different models are never
    compared, and a candidate without a vector is never dropped by the selector.
    """
    raw: bytes | memoryview | None = getattr(article, "vector_bytes", None)
    if raw is None or (model_id is not None and article.embedding_model != model_id):
        return ArticleVector(vector=None, content_hash=article.embedding_content_hash)
    return ArticleVector(vector=vector_from_send(raw), content_hash=article.embedding_content_hash)
