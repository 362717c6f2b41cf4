"""Who is calling: a raw bearer key (and optional impersonation target) resolved to a Principal. No DRF here:
models, services and the scope read principals; only `loopmem.auth` speaks HTTP."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from loopmem.errors import (
    Forbidden,
    ImpersonationTenantNotFound,
    ImpersonationTenantRequired,
    Unauthorized,
)
from loopmem.key_lookup import key_with_tenant
from loopmem.models import ApiKey, Tenant

IMPERSONATE_HEADER = "HTTP_X_IMPERSONATE_TENANT"


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
    # At most one write per key per resolution window, so authentication stays a read on the hot path.
    stale_before = now - timedelta(seconds=settings.API_KEY_LAST_USED_RESOLUTION_SECONDS)
    if api_key.last_used_at is not None and api_key.last_used_at > stale_before:
        return
    ApiKey.objects.filter(Q(last_used_at__isnull=True) | Q(last_used_at__lt=stale_before), id=api_key.id).update(
        last_used_at=now
    )
