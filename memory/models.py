"""Long-term memories: agent-private facts, embedded, superseded rather than mutated."""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Case, F, Func, Q, Value, When
from psycopg.types.multirange import Multirange
from psycopg.types.range import Range

from loopmem.database.tenant_routing import TenantRoutedModel, TenantRoutedQuerySet
from loopmem.embedding import vector_index
from loopmem.embedding.columns import EmbeddedColumns
from loopmem.models import Tenant
from loopmem.tenancy.scope import Scope
from memory.event_time import DaySpan
from projects.models import Project

MAX_TEXT_BYTES = 100_000
SESSION_SEQ = "session_memories_seq"
# The keyword lane's text-search configuration, baked into the generated column; a query is parsed with the same one
# (memory.keyword_lane). Chosen by measurement (docs/quality.md): stemming is applied to the memory and the query
# alike, so identifiers survive it (the parser keeps `deploy-prod.yaml`, `v2.3.1` and `kl1008` whole and splits
# `ERR_TLS_CERT` into its words on both sides), and a second, unstemmed vector beside it bought nothing.
KEYWORD_CONFIG = "english"


class MemoryQuerySet(TenantRoutedQuerySet["Memory"]):
    def for_scope(self, scope: Scope) -> MemoryQuerySet:
        # (tenant, subject) is the isolation boundary; project only narrows inside it.
        return self.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id)

    def for_tenant(self, tenant_id: uuid.UUID) -> MemoryQuerySet:
        """Tenant-wide: superadmin oversight only."""
        return self.filter(tenant_id=tenant_id)

    def live(self) -> MemoryQuerySet:
        return self.filter(superseded_by__isnull=True)

    def in_partition(self, project_id: uuid.UUID | None) -> MemoryQuerySet:
        """Reference §4.3: the global bucket, plus the project's rows when one is named."""
        if project_id is None:
            return self.filter(project_id__isnull=True)
        return self.filter(Q(project_id__isnull=True) | Q(project_id=project_id))

    def newest_first(self) -> MemoryQuerySet:
        return self.order_by("-inserted_at", "-id")


class DaySpansField(models.Field):  # type: ignore[type-arg]
    """PostgreSQL's `datemultirange`, read and written as a list of `DaySpan` (end exclusive); NULL: none named."""

    description = "days as a date multirange"

    def db_type(self, connection: Any) -> str:
        return "datemultirange"

    def get_prep_value(self, value: Any) -> Multirange[date] | None:
        if value is None or isinstance(value, Multirange):
            return value
        return Multirange([Range(span.start, span.end, "[)") for span in value])

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> list[DaySpan] | None:
        if value is None:
            return None
        return [DaySpan(span.lower, span.upper) for span in value]


class Memory(TenantRoutedModel, EmbeddedColumns):
    """One long-term fact of one subject (reference §1.1); its vector columns come from `EmbeddedColumns`."""

    class Source(models.TextChoices):
        EXPLICIT = "explicit"
        PROMOTED = "promoted"
        IMPORTED = "imported"  # written by memory import (never promoted: promotion's dedupe is its own)

    # No single-column index: every query leads with tenant_id in a composite index, and a tenant-only index
    # tempts the planner into scanning a whole tenant for one subject's rows.
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", db_index=False)
    # SET NULL: deleting a project turns its memories global; it does not delete them.
    project = models.ForeignKey(
        Project, on_delete=models.SET_NULL, null=True, blank=True, related_name="+", db_index=False
    )
    subject_id = models.CharField(max_length=200)
    text = models.TextField()
    confidence = models.FloatField(default=1.0)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.EXPLICIT)
    source_session_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001  (wire: null)
    tags = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    recall_count = models.IntegerField(default=0)
    last_recalled_at = models.DateTimeField(null=True, blank=True)
    graduated_at = models.DateTimeField(null=True, blank=True)
    # SET NULL: forgetting a superseder makes what it superseded live again.
    superseded_by = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+", db_index=False
    )
    # Import idempotency: the chain key (text hash + predecessors' keys) of a row written by import; NULL otherwise.
    import_key = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001  (NULL: not imported)
    # Kept by the database at INSERT: the keyword lane finds a row the moment it is written, before any embedding.
    # Not indexed: the lane matches every candidate of the subject against each term (memory.keyword_lane), so a GIN
    # index here would never be read and would cost 71 B a row and a pending-list merge on writes.
    search_vector = models.GeneratedField(
        expression=SearchVector("text", config=KEYWORD_CONFIG),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    # The days the text names, resolved against the day it was written (memory.event_time); NULL when it names none.
    occurred_on = DaySpansField(null=True, blank=True)
    inserted_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = MemoryQuerySet.as_manager()

    class Meta:
        db_table = "memories"
        constraints = [
            models.CheckConstraint(
                name="memories_confidence_range", condition=Q(confidence__gte=0.0) & Q(confidence__lte=1.0)
            ),
            models.CheckConstraint(
                name="memories_source_valid", condition=Q(source__in=["explicit", "promoted", "imported"])
            ),
            # Exact dedupe of promotion: one live promoted row per content per subject. Live only: a correction
            # of a promoted row that keeps its text is a second promoted row with the same content.
            models.UniqueConstraint(
                fields=["tenant", "subject_id", "embedding_content_hash"],
                condition=Q(source="promoted", superseded_by__isnull=True),
                name="memories_promoted_content_hash_uniq_idx",
            ),
            # Re-importing a file adds nothing: one row per chain key per subject.
            models.UniqueConstraint(
                fields=["tenant", "subject_id", "import_key"],
                condition=Q(import_key__isnull=False),
                name="memories_import_key_uniq_idx",
            ),
        ]
        indexes = [
            # A subject's rows. superseded_by is a key column, not an INCLUDE: the quota's live count is an
            # index-only scan (3.2 → 0.4 ms at 2,859 rows, no heap page read), and btree deduplication (which
            # INCLUDE turns off) stores a subject's live rows as one key and a list of row pointers: 11 B a row
            # instead of 82 (docs/performance.md, "Bytes per memory").
            models.Index(fields=["tenant", "subject_id", "superseded_by"], name="memories_subject_cover_idx"),
            models.Index(fields=["tenant", "-inserted_at", "-id"], name="memories_tenant_recent_idx"),
            # The foreign keys' lookups (`= id`: a project's or a memory's deletion, a version's predecessor) never
            # ask for NULL, which most rows hold: an index of every row would spend 6.6 B a row on NULL entries.
            models.Index(fields=["project"], name="memories_project_idx", condition=Q(project__isnull=False)),
            models.Index(
                fields=["superseded_by"], name="memories_superseded_by_idx", condition=Q(superseded_by__isnull=False)
            ),
            # Default recall reads only live rows: the HNSW indexes (one per vector size) hold nothing else.
            *vector_index.hnsw_indexes("memories", Q(superseded_by__isnull=True)),
            models.Index(
                fields=["tenant", "recall_count"],
                name="memories_graduation_idx",
                condition=Q(graduated_at__isnull=True, superseded_by__isnull=True),
            ),
            # The embedding backfill sweep: which tenants hold rows of which model ("" = not embedded yet).
            models.Index(fields=["tenant", "embedding_model"], name="memories_tenant_model_idx"),
            # Recall and list filters (memory.filters): tags @> / && and metadata @>, ANDed with the scope. A row
            # adds a key or two (most add only GIN's "empty" entry), so it goes straight into the index: a pending
            # list would hold up to 4 MB of pages per index for nothing (38 B a row at 200k rows).
            GinIndex(fields=["tags"], name="memories_tags_gin_idx", fastupdate=False),
            GinIndex(
                fields=["metadata"], name="memories_metadata_gin_idx", opclasses=["jsonb_path_ops"], fastupdate=False
            ),
        ]

    def __str__(self) -> str:
        return f"memory {self.id}"

    @property
    def is_live(self) -> bool:
        return self.superseded_by_id is None


class SessionTurnQuerySet(models.QuerySet["SessionTurn"]):
    def for_scope(self, scope: Scope) -> SessionTurnQuerySet:
        return self.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id)

    def unexpired(self, now: datetime) -> SessionTurnQuerySet:
        """Expired turns are never returned by any read, whether or not the prune has run."""
        return self.filter(expires_at__gt=now)

    def in_order(self) -> SessionTurnQuerySet:
        return self.order_by("inserted_at", "seq")


class SessionTurn(TenantRoutedModel):
    """One append-only turn of an agent session: the short-term tier (reference §1.2 `session_memories`)."""

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        SYSTEM = "system"
        FACT = "fact"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    subject_id = models.CharField(max_length=200)
    session_id = models.CharField(max_length=200)
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField()
    metadata = models.JSONField(default=dict, blank=True)
    expires_at = models.DateTimeField()
    inserted_at = models.DateTimeField(auto_now_add=True)
    # A database sequence: totally orders appends that share a microsecond, across processes.
    seq = models.BigIntegerField(
        db_default=Func(Value(SESSION_SEQ), function="nextval", output_field=models.BigIntegerField()),
        editable=False,
    )

    objects = SessionTurnQuerySet.as_manager()

    class Meta:
        db_table = "session_memories"
        constraints = [
            models.CheckConstraint(
                name="session_memories_role_valid", condition=Q(role__in=["user", "assistant", "system", "fact"])
            ),
        ]
        indexes = [
            # History in insertion order, and the promotion sweep's scan of a subject's sessions.
            models.Index(
                fields=["tenant", "subject_id", "session_id", "inserted_at", "seq"], name="session_history_idx"
            ),
            models.Index(fields=["expires_at"], name="session_expires_at_idx"),
        ]

    def __str__(self) -> str:
        return f"turn {self.seq} of session {self.session_id}"


class SessionPromotion(TenantRoutedModel):
    """The promotion watermark of one session (reference §1.3): what was last compiled, so unchanged is skipped."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    subject_id = models.CharField(max_length=200)
    session_id = models.CharField(max_length=200)
    session_content_hash = models.CharField(max_length=64)
    last_turn_inserted_at = models.DateTimeField(null=True, blank=True)
    last_turn_seq = models.BigIntegerField(null=True, blank=True)
    promoted_at = models.DateTimeField()
    inserted_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "session_promotions"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "subject_id", "session_id"], name="session_promotions_scope_session_uniq"
            ),
        ]
        indexes = [models.Index(fields=["tenant", "promoted_at"], name="session_promotions_budget_idx")]

    def __str__(self) -> str:
        return f"watermark of session {self.session_id}"


class PromotionJobQuerySet(models.QuerySet["PromotionJob"]):
    def for_scope(self, scope: Scope) -> PromotionJobQuerySet:
        return self.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id)


class PromotionJob(TenantRoutedModel):
    """The in-flight ledger of promotion (Celery has no unique jobs): one pending/running job per session, and
    the record a caller watches (`GET /memory/promote/:session_id`).

    Its partial unique index makes an explicit trigger racing the sweep enqueue once, and the budget counts
    the jobs still in flight so a burst cannot overshoot it. `state` is the ledger's own (what is in flight);
    `status` is what a caller is told, generated from it.
    """

    class State(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        DISCARDED = "discarded"

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        SKIPPED_UNCHANGED = "skipped_unchanged"
        FAILED = "failed"
        BUDGET_EXCEEDED = "budget_exceeded"

    IN_FLIGHT = (State.PENDING, State.RUNNING)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    subject_id = models.CharField(max_length=200)
    session_id = models.CharField(max_length=200)
    trigger = models.CharField(max_length=16)  # "explicit" | "sweep"
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    outcome = models.CharField(max_length=64, blank=True, default="")
    # What a caller is told, computed by the database from the ledger's state and outcome: it cannot drift.
    status = models.GeneratedField(
        expression=Case(
            When(state__in=["pending", "running"], then=F("state")),
            When(state="done", outcome="skipped_unchanged", then=Value("skipped_unchanged")),
            When(state="done", then=Value("succeeded")),
            When(state="discarded", outcome="budget_exceeded", then=Value("budget_exceeded")),
            default=Value("failed"),
        ),
        output_field=models.CharField(max_length=20, choices=Status.choices),
        db_persist=True,
    )
    compiler = models.CharField(max_length=32, blank=True, default="")  # "extractive" | "openai"
    attempts = models.PositiveIntegerField(default=0)
    detail = models.JSONField(default=dict, blank=True)
    # What the compile and persist of this job did (the last attempt's figures; memory_ids over all attempts).
    candidates = models.PositiveIntegerField(default=0)
    gated_out = models.PositiveIntegerField(default=0)
    quarantined = models.PositiveIntegerField(default=0)  # refused by the injection guard: never written
    deduplicated = models.PositiveIntegerField(default=0)
    superseded = models.PositiveIntegerField(default=0)
    written = models.PositiveIntegerField(default=0)
    memory_ids = ArrayField(models.UUIDField(), default=list, blank=True)
    inserted_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When the compiler was (last) called: the hourly budget counts compiles, not sessions.
    compiled_at = models.DateTimeField(null=True, blank=True)

    objects = PromotionJobQuerySet.as_manager()

    class Meta:
        db_table = "promotion_jobs"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "subject_id", "session_id"],
                condition=Q(state__in=["pending", "running"]),
                name="promotion_jobs_one_in_flight",
            ),
            models.CheckConstraint(
                name="promotion_jobs_state_valid",
                condition=Q(state__in=["pending", "running", "done", "failed", "discarded"]),
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "state"], name="promotion_jobs_state_idx"),
            models.Index(fields=["state", "updated_at"], name="promotion_jobs_rescue_idx"),
            models.Index(fields=["tenant", "compiled_at"], name="promotion_jobs_budget_idx"),
            models.Index(
                fields=["tenant", "subject_id", "session_id", "-inserted_at"], name="promotion_jobs_session_idx"
            ),
            # The retention sweep deletes finished jobs past their days.
            models.Index(
                fields=["tenant", "finished_at"],
                name="promotion_jobs_finished_idx",
                condition=Q(finished_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"promotion of session {self.session_id} ({self.status})"


class PromotionEvalSnapshot(TenantRoutedModel):
    """A day's promotion-quality figures for a tenant (reference §1.4); observability, never a gate."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    dataset_version = models.CharField(max_length=32)
    compiler = models.CharField(max_length=32, default="tenant")
    session_count = models.IntegerField(default=0)
    true_positives = models.IntegerField(default=0)
    false_positives = models.IntegerField(default=0)
    false_negatives = models.IntegerField(default=0)
    precision = models.FloatField(null=True, blank=True)
    recall = models.FloatField(null=True, blank=True)
    computed_at = models.DateTimeField()
    inserted_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "promotion_eval_snapshots"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "dataset_version", "compiler", "day"], name="promotion_eval_snapshot_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"promotion eval {self.dataset_version} {self.day}"
