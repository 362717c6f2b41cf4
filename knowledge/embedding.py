"""Articles as an embedded table: what an article embeds (its title and body), how its vector is stored, and the
name of the task that embeds it. The pipeline itself (drain, backfill, sweep, reembed) is loopmem.embedding.pipeline."""

from __future__ import annotations

from django.db.models import Q
from django.utils import timezone

from knowledge.models import Article
from loopmem.embedding import embedders
from loopmem.embedding.pipeline import EmbeddedTable, embed_row

EMBED_ARTICLE_TASK = "knowledge.tasks.embed_article_task"


def article_embed(*, article_id: str) -> str:
    """Embed one article ("embedded" | "unchanged" | "missing"); raises embedders.EmbeddingFailure."""
    return embed_row(ARTICLE_EMBEDDINGS, article_id)


def _store_article_vector(article: Article, vector: list[float], model_id: str) -> int:
    # Only if the text is still the one embedded: an edit since the read re-embeds through its own task.
    return Article.objects.filter(id=article.id, title=article.title, body=article.body).update(
        embedding=vector,
        embedding_model=model_id,
        embedding_content_hash=embedders.content_hash(article.embedding_text),
        updated_at=timezone.now(),
    )


ARTICLE_EMBEDDINGS = EmbeddedTable(
    model=Article,
    text_fields=("title", "body"),
    text_of=lambda a: a.embedding_text,
    store=_store_article_vector,
    unchanged=lambda a: Q(id=a.id, title=a.title, body=a.body),
)
