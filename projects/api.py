"""HTTP: /api/v1/projects (create, list) and /api/v1/projects/resolve."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from loopmem.auth import principal_of
from loopmem.models import ApiKey
from loopmem.pagination import page_params
from projects import selectors, services
from projects.serializers import ProjectIn, ProjectOut, ProjectResolveIn

_CREATORS = (ApiKey.Role.USER, ApiKey.Role.ORCHESTRATOR, ApiKey.Role.SUPERADMIN)


class ProjectViewSet(viewsets.ViewSet):
    """Projects of the caller's tenant (or the impersonated one)."""

    @extend_schema(request=ProjectIn, responses={201: ProjectOut})
    def create(self, request: Request) -> Response:
        principal = principal_of(request)
        principal.require_role(*_CREATORS)
        tenant = principal.require_tenant()
        data = ProjectIn(data=request.data)
        data.is_valid(raise_exception=True)
        project = services.project_create(tenant_id=tenant.id, **data.validated_data)
        return Response({"data": ProjectOut(project).data}, status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[
            OpenApiParameter("limit", int),
            OpenApiParameter("offset", int),
            OpenApiParameter("status", str, enum=["active", "archived"]),
        ],
        responses={200: ProjectOut(many=True)},
    )
    def list(self, request: Request) -> Response:
        tenant = principal_of(request).require_tenant()
        limit, offset = page_params(request.query_params)
        projects = selectors.project_list(tenant_id=tenant.id, status=request.query_params.get("status"))
        page = projects[offset : offset + limit]
        return Response(
            {
                "data": ProjectOut(page, many=True).data,
                "meta": {"total_count": projects.count(), "limit": limit, "offset": offset},
            }
        )

    @extend_schema(parameters=[ProjectResolveIn], responses={200: ProjectOut})
    @action(detail=False, methods=["get"])
    def resolve(self, request: Request) -> Response:
        tenant = principal_of(request).require_tenant()
        params = ProjectResolveIn(data=request.query_params)
        params.is_valid(raise_exception=True)
        project = selectors.project_resolve(tenant_id=tenant.id, **params.validated_data)
        return Response({"data": ProjectOut(project).data})
