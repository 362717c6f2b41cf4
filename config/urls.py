"""URL map: health probes, the OpenAPI schema and docs, and /api/v1/."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from loopmem.http import openapi  # noqa: F401  (registers the OpenAPI auth extension before the schema is built)
from loopmem.http.health import healthz, readyz
from loopmem.http.metrics_endpoint import metrics_view

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/v1/", include("projects.urls")),
    path("api/v1/", include("memory.urls")),
    path("api/v1/", include("recall.urls")),
    path("api/v1/", include("knowledge.urls")),
    path("api/v1/", include("privacy.urls")),
]

handler404 = "loopmem.http.error_responses.not_found_view"
handler500 = "loopmem.http.error_responses.server_error_view"
