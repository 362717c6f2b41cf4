"""Project use cases."""

from __future__ import annotations

import re
import uuid
from typing import Any

from django.db import IntegrityError, transaction
from django.utils.text import slugify

from loopmem.errors import DuplicateSlug, ValidationFailed
from loopmem.secret_guard.policy import SecretReport, apply_secret_policy
from projects.models import Project
from projects.repo_url import parse_repo_url

_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


def project_create(
    *,
    tenant_id: uuid.UUID,
    name: str,
    slug: str | None = None,
    repo_url: str | None = None,
    description: str = "",
    metadata: dict[str, Any] | None = None,
    report: SecretReport | None = None,
) -> Project:
    """Create a project in a tenant; the slug defaults to the slugified name and is unique per tenant.

    The tenant's secret policy runs first: a repo URL is where a token most often rides along
    (`https://x-token:ghp_…@github.com/…`).
    """
    fields = {"name": name, "repo_url": repo_url, "description": description, "metadata": metadata}
    clean = apply_secret_policy(tenant_id, fields, report=report)
    name, repo_url, description, metadata = clean["name"], clean["repo_url"], clean["description"], clean["metadata"]
    name = name.strip()
    slug = (slug or "").strip().lower() or slugify(name)[:100].strip("-_")
    repo_url = (repo_url or "").strip()
    errors: dict[str, list[str]] = {}
    if not name:
        errors["name"] = ["must not be blank"]
    if not _SLUG.match(slug):
        errors["slug"] = ["must start with a letter or digit and hold only a-z, 0-9, '-' and '_'"]
    ref = parse_repo_url(repo_url) if repo_url else None
    if repo_url and ref is None:
        errors["repo_url"] = ["must name a repository: git@host:owner/repo.git, https://host/owner/repo or owner/repo"]
    if errors:
        raise ValidationFailed(details=errors)
    try:
        with transaction.atomic():
            return Project.objects.create(
                tenant_id=tenant_id,
                name=name,
                slug=slug,
                repo_url=repo_url,
                repo_key=ref.key if ref else "",
                description=description,
                metadata=metadata or {},
            )
    except IntegrityError as exc:
        raise DuplicateSlug(details={"slug": slug}) from exc
