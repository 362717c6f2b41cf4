"""The Knowledge Wiki slice: articles, their access ledger, and the daily retrieval metrics."""

from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Q
from django.db.models.functions import Left
from django.utils import timezone

from knowledge.visibility import Viewer
from loopmem.database.tenant_routing import TenantRoutedModel
from loopmem.embedding import vector_index
from loopmem.embedding.columns import EmbeddedColumns
from loopmem.models import ApiKey, Tenant
from projects.models import Project

MAX_TITLE_LENGTH = 500
MAX_BODY_BYTES = 100_000
MAX_IDEMPOTENCY_KEY_LENGTH = 200
# The text-search configuration baked into the generated column; queries must use the same one.
SEARCH_CONFIG = "english"
ACTIVE_STATUSES = ("draft", "published")
# Article.Visibility.SHARED and Article.Status.PUBLISHED (the class is defined below its queryset).
_SHARED_WITH_EVERY_AGENT = Q(visibility="shared", status="published")


class ArticleQuerySet(models.QuerySet["Article"]):
    def visible_to(self, viewer: Viewer) -> ArticleQuerySet:
        """The one visibility rule: every read and write of articles starts here.

        User, orchestrator and superadmin viewers see the whole tenant. An agent sees published `shared`
        articles plus every article it owns (any visibility, any status). A row outside this set is a 404.
        """
        rows = self.filter(tenant_id=viewer.tenant_id)
        if viewer.sees_all:
            return rows
        return rows.filter(_SHARED_WITH_EVERY_AGENT | Q(owner_subject_id=viewer.subject_id))

    def shared_with_every_agent(self, tenant_id: uuid.UUID) -> ArticleQuerySet:
        """Published `shared` articles: part of what every viewer of the tenant sees (`visible_to`), whoever it is."""
        return self.filter(_SHARED_WITH_EVERY_AGENT, tenant_id=tenant_id)

    def editable_by(self, viewer: Viewer) -> ArticleQuerySet:
        """What the viewer may change: an agent its own articles; user, orchestrator and superadmin any."""
        rows = self.filter(tenant_id=viewer.tenant_id)
        if viewer.sees_all:
            return rows
        return rows.filter(owner_subject_id=viewer.subject_id)

    def active(self) -> ArticleQuerySet:
        """Draft or published: what holds a title and what the novelty gate compares against."""
        return self.filter(status__in=ACTIVE_STATUSES)

    def in_partition(self, project_id: uuid.UUID | None) -> ArticleQuerySet:
        """The global bucket, plus the project's articles when one is named (as memory recall reads)."""
        if project_id is None:
            return self.filter(project_id__isnull=True)
        return self.filter(Q(project_id__isnull=True) | Q(project_id=project_id))

    def embedded_with(self, model_id: str, dimensions: int) -> ArticleQuerySet:
        """Rows with a vector of this model and size: vectors of different models are never compared, nor of two
        sizes (pgvector refuses; the size predicate also lets the planner use the partial index of that size)."""
        return self.filter(vector_index.same_dimensions(dimensions), embedding__isnull=False, embedding_model=model_id)

    def summaries(self) -> ArticleQuerySet:
        """Without the heavy columns: no vector (nor a reembed's pending one), no search vector, and the body only as
        a 300-char snippet."""
        return self.defer("embedding", "pending_embedding", "search_vector", "body").annotate(snippet=Left("body", 300))

    def newest_first(self) -> ArticleQuerySet:
        return self.order_by("-inserted_at", "-id")


class Article(TenantRoutedModel, EmbeddedColumns):
    """One curated piece of tenant knowledge (reference §1.5), with visibility as columns, not metadata; its vector
    columns come from `EmbeddedColumns`."""

    class Category(models.TextChoices):
        PATTERN = "pattern"
        DECISION = "decision"
        FINDING = "finding"
        REFERENCE = "reference"

    class Status(models.TextChoices):
        DRAFT = "draft"
        PUBLISHED = "published"
        ARCHIVED = "archived"
        SUPERSEDED = "superseded"

    class Visibility(models.TextChoices):
        SHARED = "shared"  # every key of the tenant once published
        OWNER = "owner"  # the owner subject, and the tenant's user/orchestrator keys
        PRIVATE = "private"  # stored for wire parity; reads exactly like `owner` in this slice

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    title = models.CharField(max_length=MAX_TITLE_LENGTH)
    body = models.TextField()
    category = models.CharField(max_length=16, choices=Category.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    tags = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    visibility = models.CharField(max_length=16, choices=Visibility.choices, default=Visibility.SHARED)
    # The subject that wrote it (an agent's agent_id, or another key's id): owns it for visibility and edits.
    owner_subject_id = models.CharField(max_length=200)
    metadata = models.JSONField(default=dict, blank=True)
    idempotency_key = models.CharField(  # noqa: DJ001  (NULL: no key; the unique index skips NULLs)
        max_length=MAX_IDEMPOTENCY_KEY_LENGTH, null=True, blank=True
    )
    # Kept by the database: the keyword lane never depends on application code having refreshed it.
    search_vector = models.GeneratedField(
        expression=SearchVector("title", weight="A", config=SEARCH_CONFIG)
        + SearchVector("body", weight="B", config=SEARCH_CONFIG),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    inserted_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ArticleQuerySet.as_manager()

    class Meta:
        db_table = "articles"
        constraints = [
            models.CheckConstraint(
                name="articles_category_valid",
                condition=Q(category__in=["pattern", "decision", "finding", "reference"]),
            ),
            models.CheckConstraint(
                name="articles_status_valid",
                condition=Q(status__in=["draft", "published", "archived", "superseded"]),
            ),
            models.CheckConstraint(
                name="articles_visibility_valid", condition=Q(visibility__in=["shared", "owner", "private"])
            ),
            # One active article per title per tenant; this is also what serialises racing creates.
            models.UniqueConstraint(
                fields=["tenant", "title"],
                condition=~Q(status__in=["archived", "superseded"]),
                name="articles_tenant_title_active_idx",
            ),
            # Idempotency keys are the writer's: one article per (tenant, owner, key).
            models.UniqueConstraint(
                fields=["tenant", "owner_subject_id", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="articles_idempotency_key_uniq",
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "-inserted_at", "-id"], name="articles_tenant_recent_idx"),
            models.Index(fields=["tenant", "owner_subject_id"], name="articles_tenant_owner_idx"),
            models.Index(fields=["tenant", "status", "visibility"], name="articles_tenant_status_idx"),
            # No pending list: articles are written rarely and searched often, and every search would scan it.
            GinIndex(fields=["search_vector"], name="articles_search_vector_idx", fastupdate=False),
            # The semantic lane and the novelty gate read active rows only: the index holds nothing else.
            *vector_index.hnsw_indexes("articles", Q(status__in=["draft", "published"])),
            # The embedding sweep: which tenants hold rows of which model ("" = not embedded yet).
            models.Index(fields=["tenant", "embedding_model"], name="articles_tenant_model_idx"),
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def embedding_text(self) -> str:
        return article_embedding_text(self.title, self.body)


def article_embedding_text(title: str, body: str) -> str:
    """What an article is embedded (and content-hashed) as: reference §4.10's `title <> "\\n\\n" <> body`."""
    return f"{title}\n\n{body}"


class ArticleAccessEvent(TenantRoutedModel):
    """One access to an article (reference §1.6): surfaced by a search, opened, or referenced by a client."""

    class AccessType(models.TextChoices):
        SEARCH = "search"  # surfaced in a search or recall result
        GET = "get"  # the full article was read
        CONTEXT = "context"
        INDEX = "index"
        DRILL = "drill"
        REFERENCED = "referenced"  # a client's own assertion: never counted as a read

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    article = models.ForeignKey(Article, on_delete=models.CASCADE, related_name="+")
    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="+")
    access_type = models.CharField(max_length=16, choices=AccessType.choices)
    metadata = models.JSONField(default=dict, blank=True)
    accessed_at = models.DateTimeField(default=timezone.now)
    project = models.ForeignKey(Project, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    # The search (or recall) id: set on `search` rows too (the reference keeps it in metadata.search_id, which
    # these rows also carry), so "what did search X surface" is an index lookup.
    origin_search_id = models.UUIDField(null=True, blank=True)
    origin_attribution = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001  (wire: null)

    class Meta:
        db_table = "article_access_events"
        constraints = [
            models.CheckConstraint(
                name="article_access_events_type_valid",
                condition=Q(access_type__in=["search", "get", "context", "index", "drill", "referenced"]),
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "article", "accessed_at"], name="access_tenant_article_idx"),
            models.Index(fields=["tenant", "api_key", "accessed_at"], name="access_tenant_key_idx"),
            models.Index(fields=["tenant", "access_type", "accessed_at"], name="access_tenant_type_idx"),
            models.Index(fields=["tenant", "-accessed_at"], name="access_tenant_recent_idx"),
            models.Index(
                fields=["tenant", "origin_search_id"],
                name="access_tenant_search_idx",
                condition=Q(origin_search_id__isnull=False),
            ),
            # The retention sweep blanks query texts past their days: it reads only rows still holding one.
            models.Index(
                fields=["tenant", "accessed_at"], name="access_query_text_idx", condition=Q(metadata__has_key="query")
            ),
        ]

    def __str__(self) -> str:
        return f"{self.access_type} of article {self.article_id}"


class RetrievalMetricsSnapshot(TenantRoutedModel):
    """One tenant's retrieval funnel for one UTC day (reference §4.17), upserted on (tenant, day, window)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    window_seconds = models.IntegerField()
    searched = models.IntegerField(default=0)
    followed_through = models.IntegerField(default=0)
    precision = models.FloatField(default=0.0)
    referenced = models.IntegerField(default=0)
    reference_rate = models.FloatField(default=0.0)
    total_events = models.IntegerField(default=0)
    unique_keys = models.IntegerField(default=0)
    computed_at = models.DateTimeField()
    inserted_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "retrieval_metrics_snapshots"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "day", "window_seconds"], name="retrieval_metrics_tenant_day_window_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"retrieval metrics {self.tenant_id} {self.day}"
