"""DRF authentication: `Authorization: Bearer <key>` to a Principal (see `loopmem.tenancy.principal`)."""

from __future__ import annotations

from typing import Any

from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from loopmem.errors import Unauthorized
from loopmem.models import ApiKey
from loopmem.tenancy.principal import IMPERSONATE_HEADER, Principal, principal_for_key


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
