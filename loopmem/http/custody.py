"""Custody halt: while a tenant is halted its keys may read but not write."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from loopmem.errors import TenantHalted
from loopmem.tenancy.principal import Principal


class TenantNotHalted(BasePermission):
    """503 `tenant_halted` for a halted tenant's writes.

    Reads sent as POST (recall) are listed by the view in `halt_exempt_actions`. Superadmin
    oversight through impersonation is never frozen: it is how operators act during a halt.
    """

    def has_permission(self, request: Request, view: Any) -> bool:
        principal = request.user
        if not isinstance(principal, Principal) or request.method in SAFE_METHODS:
            return True
        if getattr(view, "action", None) in getattr(view, "halt_exempt_actions", ()):
            return True
        if principal.impersonating or principal.tenant is None:
            return True
        if principal.tenant.is_halted:
            raise TenantHalted()
        return True
