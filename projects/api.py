"""HTTP: /api/v1/projects (create, list) and /api/v1/projects/resolve."""

from __future__ import annotations

from rest_framework import status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from loopmem.http.base_view import ScopedViewSet
from loopmem.http.envelopes import paginated, with_redactions
from loopmem.http.inputs import parse
from loopmem.models import ApiKey
from loopmem.params import page_params
from loopmem.secret_guard.policy import SecretReport
from projects import selectors, services
from projects.schema import project_schema
from projects.serializers import ProjectIn, ProjectOut, ProjectResolveIn

_CREATORS = (ApiKey.Role.USER, ApiKey.Role.ORCHESTRATOR, ApiKey.Role.SUPERADMIN)


@project_schema
class ProjectViewSet(ScopedViewSet):
    """Projects of the caller's tenant (or the impersonated one)."""

    def create(self, request: Request) -> Response:
        self.principal.require_role(*_CREATORS)
        tenant = self.principal.require_tenant()
        redacted = SecretReport()
        project = services.project_create(tenant_id=tenant.id, report=redacted, **parse(ProjectIn, request.data))
        return Response(with_redactions({"data": ProjectOut(project).data}, redacted), status=status.HTTP_201_CREATED)

    def list(self, request: Request) -> Response:
        tenant = self.principal.require_tenant()
        limit, offset = page_params(request.query_params)
        projects = selectors.project_list(tenant_id=tenant.id, status=request.query_params.get("status"))
        page = ProjectOut(projects[offset : offset + limit], many=True).data
        # Projects are not a memory read: the reference gives their list no `outcome`.
        return Response(paginated(page, total_count=projects.count(), limit=limit, offset=offset, outcome=False))

    @action(detail=False, methods=["get"])
    def resolve(self, request: Request) -> Response:
        tenant = self.principal.require_tenant()
        project = selectors.project_resolve(tenant_id=tenant.id, **parse(ProjectResolveIn, request.query_params))
        return Response({"data": ProjectOut(project).data})
