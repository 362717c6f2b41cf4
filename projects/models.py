"""Projects partition a tenant's memories and knowledge; NULL project means the global bucket."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from loopmem.models import Tenant


class ProjectQuerySet(models.QuerySet["Project"]):
    def for_tenant(self, tenant_id: uuid.UUID) -> ProjectQuerySet:
        return self.filter(tenant_id=tenant_id)

    def active(self) -> ProjectQuerySet:
        return self.filter(status=Project.Status.ACTIVE)


class Project(models.Model):
    """A codebase or workstream inside a tenant."""

    class Status(models.TextChoices):
        ACTIVE = "active"
        ARCHIVED = "archived"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="projects")
    name = models.CharField(max_length=200)
    slug = models.CharField(max_length=100)
    repo_url = models.CharField(max_length=500, blank=True, default="")
    # Derived from repo_url by projects.repo_url.repo_key at write time; indexed for resolve.
    repo_key = models.CharField(max_length=500, blank=True, default="")
    description = models.TextField(blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    metadata = models.JSONField(default=dict, blank=True)
    inserted_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ProjectQuerySet.as_manager()

    class Meta:
        db_table = "projects"
        constraints = [
            models.UniqueConstraint(fields=["tenant", "slug"], name="projects_tenant_slug_uniq"),
            models.CheckConstraint(name="projects_status_valid", condition=Q(status__in=["active", "archived"])),
        ]
        indexes = [models.Index(fields=["tenant", "repo_key"], name="projects_tenant_repo_key_idx")]

    def __str__(self) -> str:
        return self.slug
