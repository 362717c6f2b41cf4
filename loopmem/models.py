"""Tenants and API keys: who is calling, and on whose behalf."""

from __future__ import annotations

import contextlib
import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from loopmem.crypto import EncryptedTextField


class TenantQuerySet(models.QuerySet["Tenant"]):
    def by_id_or_slug(self, value: str) -> TenantQuerySet:
        """Operators and the impersonation header name a tenant either way."""
        match = Q(slug=value)
        with contextlib.suppress(ValueError):
            match |= Q(id=uuid.UUID(value))
        return self.filter(match)


class SecretPolicy(models.TextChoices):
    """What a write holding a secret does (docs/security.md): refused (the default), redacted, or stored as sent."""

    REFUSE = "refuse"
    REDACT = "redact"
    ALLOW = "allow"


class Tenant(models.Model):
    """An isolated customer: every memory, session turn, article and project belongs to exactly one."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    custody_halted_at = models.DateTimeField(null=True, blank=True)
    # None means the deployment default (settings.RATE_LIMIT_PER_KEY_PER_MINUTE).
    rate_limit_requests_per_minute = models.PositiveIntegerField(null=True, blank=True)

    embedding_provider = models.CharField(max_length=32, blank=True, default="")
    embedding_model = models.CharField(max_length=200, blank=True, default="")
    embedding_base_url = models.CharField(max_length=500, blank=True, default="")
    embedding_api_key = EncryptedTextField(blank=True, default="")
    llm_provider = models.CharField(max_length=32, blank=True, default="")
    llm_model = models.CharField(max_length=200, blank=True, default="")
    llm_base_url = models.CharField(max_length=500, blank=True, default="")
    llm_api_key = EncryptedTextField(blank=True, default="")
    # Set by `manage.py set_tenant_policy --secrets`; read by loopmem.secret_guard.policy on every write.
    secret_policy = models.CharField(max_length=16, choices=SecretPolicy.choices, default=SecretPolicy.REFUSE)

    inserted_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        db_table = "tenants"
        constraints = [
            models.CheckConstraint(
                name="tenants_secret_policy_valid", condition=Q(secret_policy__in=["refuse", "redact", "allow"])
            ),
        ]

    def __str__(self) -> str:
        return self.slug

    @property
    def is_halted(self) -> bool:
        return self.custody_halted_at is not None

    @property
    def rate_limit_per_minute(self) -> int:
        """Requests per minute allowed to each of this tenant's keys."""
        return self.rate_limit_requests_per_minute or settings.RATE_LIMIT_PER_KEY_PER_MINUTE


class ApiKey(models.Model):
    """A bearer credential. Only its sha256 is stored; the raw key is shown once, at creation."""

    class Role(models.TextChoices):
        AGENT = "agent"
        ORCHESTRATOR = "orchestrator"
        USER = "user"
        SUPERADMIN = "superadmin"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, null=True, blank=True, related_name="api_keys")
    name = models.CharField(max_length=200, blank=True, default="")
    key_hash = models.CharField(max_length=64, unique=True)
    key_prefix = models.CharField(max_length=16)
    role = models.CharField(max_length=16, choices=Role.choices)
    agent_id = models.CharField(max_length=200, blank=True, default="")
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    inserted_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "api_keys"
        constraints = [
            models.CheckConstraint(
                name="api_keys_role_valid",
                condition=Q(role__in=["agent", "orchestrator", "user", "superadmin"]),
            ),
            # Agent and orchestrator keys act for an agent; without one there is no memory owner.
            models.CheckConstraint(
                name="api_keys_agent_id_required",
                condition=~Q(role__in=["agent", "orchestrator"]) | ~Q(agent_id=""),
            ),
            # Superadmin keys are tenant-less; every other key belongs to exactly one tenant.
            models.CheckConstraint(
                name="api_keys_tenant_iff_not_superadmin",
                condition=(Q(role="superadmin") & Q(tenant__isnull=True))
                | (~Q(role="superadmin") & Q(tenant__isnull=False)),
            ),
            # One live key per (tenant, agent, role): rotation is revoke-then-create.
            models.UniqueConstraint(
                fields=["tenant", "agent_id", "role"],
                condition=Q(revoked_at__isnull=True) & Q(role__in=["agent", "orchestrator"]),
                name="api_keys_one_active_per_agent_role",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key_prefix}… ({self.role})"

    @property
    def is_superadmin(self) -> bool:
        return self.role == self.Role.SUPERADMIN

    def is_usable(self, now: datetime) -> bool:
        """Not revoked and not expired at `now`."""
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or self.expires_at > now


class DeletionAudit(models.Model):
    """One deleted (or superseded, or blanked) row, on record: who, what, when and why; never the text.

    Append-only: a database trigger refuses every UPDATE and DELETE of this table (migration 0004), and no
    foreign key ties it to a row that could cascade it away. `text_hash` and `subject_hash` are keyed HMACs
    (`loopmem.tenancy.audit`): they confirm a known text against the record, and cannot give one back.
    """

    class Action(models.TextChoices):
        DELETE = "delete"  # the row is gone
        SUPERSEDE = "supersede"  # a correction: the row stays, hidden from default reads
        BLANK = "blank"  # the row stays, its text is removed (an access event's query)

    id = models.BigAutoField(primary_key=True)
    recorded_at = models.DateTimeField(default=timezone.now)
    tenant_id = models.UUIDField()
    subject_hash = models.CharField(max_length=64, blank=True, default="")
    # Who: the API key (None for an operator command or the system) and its role, or "operator" / "system".
    actor_key_id = models.UUIDField(null=True, blank=True)
    actor_role = models.CharField(max_length=32)
    action = models.CharField(max_length=16, choices=Action.choices)
    table_name = models.CharField(max_length=64)
    row_id = models.CharField(max_length=200)
    text_hash = models.CharField(max_length=64, blank=True, default="")  # "" when the row holds no text
    # Why: the endpoint ("DELETE /api/v1/memory/:id") or the command ("erase_subject").
    reason = models.CharField(max_length=200)

    class Meta:
        db_table = "deletion_audit"
        constraints = [
            models.CheckConstraint(
                name="deletion_audit_action_valid", condition=Q(action__in=["delete", "supersede", "blank"])
            ),
        ]
        indexes = [
            models.Index(fields=["tenant_id", "recorded_at", "id"], name="deletion_audit_tenant_time_idx"),
            models.Index(fields=["tenant_id", "subject_hash", "recorded_at"], name="deletion_audit_subject_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.action} of {self.table_name} {self.row_id}"


class IdempotencyRecord(models.Model):
    """The first answer to a write sent with an `Idempotency-Key`, replayed to its retries (loopmem.http.idempotency).

    Written in the same transaction as the write it answers, so a key is recorded if and only if its write
    committed; the unique (tenant, subject, key) makes a concurrent retry wait for the first and then replay it.
    Kept LOOPMEM_IDEMPOTENCY_RETENTION_SECONDS, then pruned by the retention sweep (privacy.retention).
    """

    id = models.BigAutoField(primary_key=True)
    tenant_id = models.UUIDField()
    subject_id = models.CharField(max_length=200)
    key = models.CharField(max_length=255)
    operation = models.CharField(max_length=32)
    request_hash = models.CharField(max_length=64)  # sha256 of the operation and the canonical JSON body
    response_status = models.PositiveSmallIntegerField()
    response_body = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "idempotency_records"
        constraints = [
            models.UniqueConstraint(fields=["tenant_id", "subject_id", "key"], name="idempotency_key_unique"),
        ]
        indexes = [models.Index(fields=["tenant_id", "created_at"], name="idempotency_tenant_created_idx")]

    def __str__(self) -> str:
        return f"{self.operation} {self.key}"
