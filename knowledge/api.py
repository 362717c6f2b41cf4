"""HTTP: /api/v1/knowledge/articles (propose, list, get, patch) and /api/v1/knowledge/search."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from knowledge import envelopes, recorded_reads, selectors, services
from knowledge.schema import article_schema, search_schema
from knowledge.serializers import (
    ArticleListIn,
    ArticleOut,
    ArticlePatchIn,
    ArticleProposeIn,
    ArticleSummaryOut,
    KnowledgeSearchIn,
)
from knowledge.visibility import Viewer, viewer_for
from loopmem.http.base_view import ScopedViewSet
from loopmem.http.envelopes import paginated, with_redactions
from loopmem.http.inputs import parse, parse_body
from loopmem.params import page_params
from loopmem.secret_guard.policy import SecretReport


class KnowledgeViewSet(ScopedViewSet):
    """A knowledge endpoint: the caller as an article viewer (tenant, subject, and whether it curates)."""

    @cached_property
    def viewer(self) -> Viewer:
        return viewer_for(self.principal, self.scope)


@article_schema
class ArticleViewSet(KnowledgeViewSet):
    """The tenant's articles, as far as the key may see them (Article.objects.visible_to)."""

    lookup_value_regex = "[^/]+"

    def create(self, request: Request) -> Response:
        args = parse_body(ArticleProposeIn, request)
        redacted = SecretReport()  # the tenant's secret policy: `meta.redacted` only when it redacted
        proposal = services.article_propose(viewer=self.viewer, report=redacted, **args)
        body = envelopes.proposal(verdict=proposal.verdict, created=proposal.created, article=proposal.article)
        return Response(
            with_redactions(body, redacted),
            status=status.HTTP_201_CREATED if proposal.created else status.HTTP_200_OK,
        )

    def list(self, request: Request) -> Response:
        filters = parse(ArticleListIn, request.query_params)
        limit, offset = page_params(request.query_params)
        rows = selectors.article_list(viewer=self.viewer, **filters)
        page = ArticleSummaryOut(rows[offset : offset + limit], many=True).data
        return Response(paginated(page, total_count=rows.count(), limit=limit, offset=offset))

    def retrieve(self, request: Request, pk: str) -> Response:
        article = recorded_reads.article_get_recorded(viewer=self.viewer, principal=self.principal, article_id=pk)
        return Response({"data": ArticleOut(article).data})

    def partial_update(self, request: Request, pk: str) -> Response:
        args = parse_body(ArticlePatchIn, request)
        redacted = SecretReport()
        article = services.article_update(viewer=self.viewer, article_id=pk, report=redacted, **args)
        return Response(with_redactions({"data": ArticleOut(article).data}, redacted))


@search_schema
class KnowledgeSearchViewSet(KnowledgeViewSet):
    """Hybrid search over the articles the key may see (reference §2.9)."""

    def list(self, request: Request) -> Response:
        args = parse(KnowledgeSearchIn, _search_params(request.query_params))
        result = recorded_reads.knowledge_search_recorded(viewer=self.viewer, principal=self.principal, **args)
        return Response(envelopes.search(result))


def _search_params(params: Any) -> dict[str, Any]:
    """The search parameters as a plain dict, `q` falling back to its alias `query`."""
    raw: dict[str, Any] = {key: params.get(key) for key in params}
    raw["tags"] = params.getlist("tags")
    query = params.get("q")
    raw["query"] = params.get("query") if query is None else query
    return raw
