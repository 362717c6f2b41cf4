"""Authentication: `Authorization: Bearer <key>` to a Principal (key, effective tenant, impersonation)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from loopmem.errors import (
    Forbidden,
    ImpersonationTenantNotFound,
    ImpersonationTenantRequired,
    Unauthorized,
)
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
    api_key = ApiKey.objects.select_related("tenant").filter(key_hash=hash_key(raw_key)).first()
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


class ApiKeyAuthentication(BaseAuthentication):
    """DRF authentication: no header → anonymous (then 401); a bad header or key → 401."""

    def authenticate(self, request: Request) -> tuple[Principal, ApiKey] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        scheme, _, raw_key = header.partition(" ")
        if scheme.lower() != "bearer" or not raw_key.strip():
            raise Unauthorized("The Authorization header must be 'Bearer <key>'")
        principal = principal_for_key(raw_key=raw_key.strip(), impersonate=request.META.get(IMPERSONATE_HEADER))
        return principal, principal.api_key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="loopmem"'


class IsApiKeyAuthenticated(BasePermission):
    """Every API endpoint needs a key; a request without one is 401 `unauthorized`."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if isinstance(request.user, Principal):
            return True
        raise Unauthorized("A valid API key is required: send 'Authorization: Bearer <key>'")


def principal_of(request: Request) -> Principal:
    """The authenticated principal of a request that passed IsApiKeyAuthenticated."""
    user = request.user
    if not isinstance(user, Principal):
        raise Unauthorized()
    return user
