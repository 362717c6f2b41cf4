"""HTTP: POST /api/v1/erasures, a superadmin erasing one subject of the tenant it impersonates."""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response

from loopmem.http.base_view import ScopedViewSet
from loopmem.http.inputs import parse_body
from loopmem.models import ApiKey
from loopmem.tenancy.audit import Actor
from privacy import erasure
from privacy.schema import erasure_schema
from privacy.serializers import ErasureIn


@erasure_schema
class ErasureViewSet(ScopedViewSet):
    """Erase a subject (docs/security.md): superadmin keys only, impersonating the subject's tenant.

    A dedicated route rather than `DELETE /memory?subject_id=`: an erasure reaches past memory (articles, the
    access ledger, Redis), and a dry run must be askable.
    """

    def create(self, request: Request) -> Response:
        self.principal.require_role(ApiKey.Role.SUPERADMIN)
        args = parse_body(ErasureIn, request)
        report = erasure.subject_erase(
            tenant=self.principal.require_tenant(), actor=Actor.of(self.principal, "POST /api/v1/erasures"), **args
        )
        return Response({"data": report.as_dict()})
