"""Who is calling: a raw bearer key (and optional impersonation target) resolved to a Principal. No DRF here:
models, services and the scope read principals; only `loopmem.http.auth` speaks HTTP."""

from __future__ import annotations

import functools
import hashlib
import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Q
from django.utils import timezone

from loopmem.database import async_commit
from loopmem.errors import (
    Forbidden,
    ImpersonationTenantNotFound,
    ImpersonationTenantRequired,
    Unauthorized,
)
from loopmem.models import ApiKey, Tenant
from loopmem.runtime import after_response
from loopmem.tenancy.key_lookup import key_with_tenant

IMPERSONATE_HEADER = "HTTP_X_IMPERSONATE_TENANT"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key, and the tenant it acts in (its own, or the impersonated one)."""

    api_key: ApiKey
    tenant: Tenant | None
    impersonating: bool = False

    # DRF reads `request.user.is_authenticated`.
    is_authenticated = True

    @property
    def role(self) -> str:
        return self.api_key.role

    def require_tenant(self) -> Tenant:
        """The tenant this request acts in; a tenant-less superadmin must name one by impersonating."""
        if self.tenant is None:
            raise ImpersonationTenantRequired()
        return self.tenant

    def require_role(self, *roles: str) -> None:
        """Refuse (403 forbidden) unless the key has one of `roles`."""
        if self.role not in roles:
            raise Forbidden(f"This endpoint needs one of the roles: {', '.join(roles)}")


def hash_key(raw_key: str) -> str:
    """The stored form of a key: lowercase sha256 hex."""
    return hashlib.sha256(raw_key.encode()).hexdigest()


def principal_for_key(*, raw_key: str, impersonate: str | None) -> Principal:
    """Resolve a raw bearer key (and optional impersonation target) or raise Unauthorized."""
    now = timezone.now()
    api_key = key_with_tenant(hash_key(raw_key))
    if api_key is None or not api_key.is_usable(now):
        # Unknown, revoked and expired keys are indistinguishable on purpose.
        raise Unauthorized("The API key is missing, unknown, revoked or expired")
    _touch_last_used(api_key, now)

    if impersonate is None or impersonate.strip() == "":
        return Principal(api_key=api_key, tenant=api_key.tenant)
    if not api_key.is_superadmin:
        raise Forbidden("X-Impersonate-Tenant is for superadmin keys only")
    return Principal(api_key=api_key, tenant=_impersonation_target(impersonate.strip()), impersonating=True)


def _impersonation_target(id_or_slug: str) -> Tenant:
    tenant = Tenant.objects.by_id_or_slug(id_or_slug).first()
    if tenant is None:
        raise ImpersonationTenantNotFound()
    return tenant


def _touch_last_used(api_key: ApiKey, now: Any) -> None:
    # At most one write per key per resolution window, so authentication stays a read on the hot path; and that one
    # write waits for neither the response nor the disk: a key's first use in a window (every request of an agent
    # that calls less often than once a minute) would otherwise pay an UPDATE and its commit's WAL flush.
    stale_before = now - timedelta(seconds=settings.API_KEY_LAST_USED_RESOLUTION_SECONDS)
    if api_key.last_used_at is not None and api_key.last_used_at > stale_before:
        return
    after_response.run_or_defer(functools.partial(_record_last_used, api_key.id, stale_before, now))


def _record_last_used(key_id: uuid.UUID, stale_before: Any, now: Any) -> None:
    """Bookkeeping: a failure is logged, never raised (the request it belongs to has its answer)."""
    try:
        with async_commit.bookkeeping_atomic():  # outside a request this runs at once, maybe in a caller's transaction
            ApiKey.objects.filter(Q(last_used_at__isnull=True) | Q(last_used_at__lt=stale_before), id=key_id).update(
                last_used_at=now
            )
    except DatabaseError:
        logger.warning("recording key %s's last use failed", key_id, exc_info=True)
