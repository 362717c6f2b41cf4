"""Project reads: list, fetch-in-tenant, and resolve by slug / repo URL / name."""

from __future__ import annotations

import uuid

from django.db.models import Q, QuerySet

from loopmem.errors import AmbiguousResolution, NoIdentifier, NotFound
from projects.models import Project
from projects.repo_url import parse_repo_url


def project_list(*, tenant_id: uuid.UUID, status: str | None = None) -> QuerySet[Project]:
    """The tenant's projects, oldest first."""
    projects = Project.objects.for_tenant(tenant_id)
    if status:
        projects = projects.filter(status=status)
    return projects.order_by("inserted_at", "id")


def project_in_tenant(*, tenant_id: uuid.UUID, project_id: uuid.UUID) -> Project | None:
    """The project if it belongs to the tenant; a foreign project is indistinguishable from none."""
    return Project.objects.for_tenant(tenant_id).filter(id=project_id).first()


def project_resolve(
    *, tenant_id: uuid.UUID, slug: str | None = None, repo_url: str | None = None, name: str | None = None
) -> Project:
    """Reference §2.10: try slug, then repo_url, then name; the first identifier that matches wins.

    Empty identifiers count as absent. A fuzzy identifier (repo_url, name) that matches more than one
    active project is ambiguous (409) rather than a guess.
    """
    identifiers = [
        (kind, (value or "").strip()) for kind, value in (("slug", slug), ("repo_url", repo_url), ("name", name))
    ]
    supplied = [(kind, value) for kind, value in identifiers if value]
    if not supplied:
        raise NoIdentifier()
    tenant_projects = Project.objects.for_tenant(tenant_id)
    for kind, value in supplied:
        matches = list(tenant_projects.filter(_match(kind, value)).order_by("-updated_at", "id")[:20])
        if not matches:
            continue
        active = [p for p in matches if p.status == Project.Status.ACTIVE]
        if len(active) > 1:
            raise AmbiguousResolution(details={"identifier": kind, "candidates": [str(p.id) for p in active]})
        return active[0] if active else matches[0]
    raise NotFound("No project matches the given identifiers")


def _match(kind: str, value: str) -> Q:
    if kind == "slug":
        return Q(slug__iexact=value)
    if kind == "name":
        return Q(name__iexact=value)
    ref = parse_repo_url(value)
    if ref is None:
        return Q(pk__in=[])
    if ref.host:
        # A full URL matches its own host, or a project stored as bare owner/repo.
        return Q(repo_key=ref.key) | Q(repo_key=ref.path)
    # A bare owner/repo matches it on any host.
    return Q(repo_key=ref.path) | Q(repo_key__endswith="/" + ref.path)
