"""OpenAPI for /api/v1/projects: each operation's request, its success envelope and every error it can give."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view

from loopmem.errors import (
    AmbiguousResolution,
    DuplicateSlug,
    Forbidden,
    NoIdentifier,
    NotFound,
    SecretDetected,
    ValidationFailed,
)
from loopmem.http.openapi import PAGE_PARAMETERS, data_envelope, page, responses
from projects.serializers import ProjectIn, ProjectOut, ProjectResolveIn

project_schema = extend_schema_view(
    # Only user, orchestrator and superadmin keys create projects: an agent key is 403 `forbidden`.
    create=extend_schema(
        request=ProjectIn,
        responses=responses(
            {201: data_envelope("ProjectCreateOut", ProjectOut(), write=True)},
            Forbidden,
            ValidationFailed,
            DuplicateSlug,
            SecretDetected,
            body=True,
            write=True,
        ),
    ),
    list=extend_schema(
        parameters=[
            *PAGE_PARAMETERS,
            OpenApiParameter("status", str, description="active or archived (any other value matches no project)"),
        ],
        responses=responses({200: page("ProjectPage", ProjectOut(), outcome=False)}),
    ),
    resolve=extend_schema(
        parameters=[ProjectResolveIn],
        responses=responses(
            {200: data_envelope("ProjectResolveOut", ProjectOut())}, NotFound, AmbiguousResolution, NoIdentifier
        ),
    ),
)
