"""HTTP: /api/v1/knowledge/articles (propose, list, get, patch) and /api/v1/knowledge/search."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from knowledge import ledger, selectors, services
from knowledge.models import Article
from knowledge.selectors import MAX_QUERY_LENGTH, SEARCH_MODES, SearchMode, SearchResult
from knowledge.serializers import ArticleOut, ArticlePatchIn, ArticleProposeIn, ArticleSummaryOut
from knowledge.visibility import viewer_for
from loopmem.auth import principal_of
from loopmem.errors import BadRequest
from loopmem.models import ApiKey
from loopmem.outcome import outcome_for
from loopmem.pagination import page_params
from loopmem.params import MAX_OFFSET, clamp, lenient_int
from loopmem.request_body import json_object
from projects.project_ids import parse_project_id


class ArticleViewSet(viewsets.ViewSet):
    """The tenant's articles, as far as the key may see them (Article.objects.visible_to)."""

    lookup_value_regex = "[^/]+"

    @extend_schema(request=ArticleProposeIn, responses={201: None, 200: None})
    def create(self, request: Request) -> Response:
        body = json_object(request)
        project_id = parse_project_id(body.get("project_id"))
        viewer = viewer_for(principal_of(request))
        proposal_in = ArticleProposeIn(data=body)
        proposal_in.is_valid(raise_exception=True)
        proposal = services.article_propose(viewer=viewer, project_id=project_id, **proposal_in.validated_data)
        article = ArticleSummaryOut(proposal.article).data if proposal.article is not None else None
        return Response(
            {"data": {"verdict": proposal.verdict, "created": proposal.created, "article": article}},
            status=status.HTTP_201_CREATED if proposal.created else status.HTTP_200_OK,
        )

    @extend_schema(
        parameters=[
            OpenApiParameter("limit", int),
            OpenApiParameter("offset", int),
            OpenApiParameter("status", str, enum=Article.Status.values),
            OpenApiParameter("category", str, enum=Article.Category.values),
            OpenApiParameter("tags", str, description="comma-separated; an article must carry all of them"),
            OpenApiParameter("project_id", str, description="that project's articles only"),
        ],
        responses={200: ArticleSummaryOut(many=True)},
    )
    def list(self, request: Request) -> Response:
        params = request.query_params
        project_id = parse_project_id(params.get("project_id"))
        viewer = viewer_for(principal_of(request))
        limit, offset = page_params(params)
        rows = selectors.article_list(
            viewer=viewer,
            status=_choice(params, "status", Article.Status.values),
            category=_choice(params, "category", Article.Category.values),
            tags=_tags(params),
            project_id=project_id,
        )
        page = list(rows[offset : offset + limit])
        meta: dict[str, Any] = {"total_count": rows.count(), "limit": limit, "offset": offset}
        meta["outcome"] = outcome_for(meta, count=len(page), offset=offset)
        return Response({"data": ArticleSummaryOut(page, many=True).data, "meta": meta})

    @extend_schema(responses={200: ArticleOut})
    def retrieve(self, request: Request, pk: str) -> Response:
        principal = principal_of(request)
        article = selectors.article_get(viewer=viewer_for(principal), article_id=pk)
        ledger.access_record_get(
            tenant_id=article.tenant_id,
            api_key_id=principal.api_key.id,
            article_id=article.id,
            project_id=article.project_id,
        )
        return Response({"data": ArticleOut(article).data})

    @extend_schema(request=ArticlePatchIn, responses={200: ArticleOut})
    def partial_update(self, request: Request, pk: str) -> Response:
        viewer = viewer_for(principal_of(request))
        patch_in = ArticlePatchIn(data=json_object(request))
        patch_in.is_valid(raise_exception=True)
        article = services.article_update(viewer=viewer, article_id=pk, **patch_in.validated_data)
        return Response({"data": ArticleOut(article).data})


class KnowledgeSearchViewSet(viewsets.ViewSet):
    """Hybrid search over the articles the key may see (reference §2.9)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("q", str, description="required, at most 500 characters; `query` is an alias"),
            OpenApiParameter("mode", str, enum=list(SEARCH_MODES)),
            OpenApiParameter("project_id", str, description="the global articles plus this project's"),
            OpenApiParameter("category", str, enum=Article.Category.values),
            OpenApiParameter("tags", str, description="comma-separated; an article must carry all of them"),
            OpenApiParameter("limit", int),
            OpenApiParameter("offset", int),
        ],
        responses={200: None},
    )
    def list(self, request: Request) -> Response:
        params = request.query_params
        project_id = parse_project_id(params.get("project_id"))
        query = _search_query(params)
        mode = _mode(params)
        category = _choice(params, "category", Article.Category.values)
        tags = _tags(params)
        limit = clamp(lenient_int(params.get("limit"), selectors.DEFAULT_SEARCH_LIMIT), 1, selectors.MAX_SEARCH_LIMIT)
        offset = clamp(lenient_int(params.get("offset"), 0), 0, MAX_OFFSET)
        principal = principal_of(request)
        viewer = viewer_for(principal)
        result = selectors.knowledge_search(
            viewer=viewer,
            query=query,
            mode=mode,
            project_id=project_id,
            category=category,
            tags=tags,
            limit=limit,
            offset=offset,
        )
        if principal.role == ApiKey.Role.AGENT:
            # The surfacing ledger measures what agents are shown; curators browsing are not the funnel.
            ledger.access_record_surfacing(
                tenant_id=viewer.tenant_id,
                api_key_id=principal.api_key.id,
                search_id=result.search_id,
                query=query,
                articles=[hit.article for hit in result.hits],
                first_rank=offset + 1,
                project_id=project_id,
                extra_metadata={"search_mode": result.search_mode},
            )
        return Response(search_envelope(result))


class SearchHitData(TypedDict):
    id: str
    title: str
    category: str
    tags: list[str]
    score: float
    snippet: str


class SearchEnvelope(TypedDict):
    data: list[SearchHitData]
    meta: dict[str, Any]


def search_envelope(result: SearchResult) -> SearchEnvelope:
    """{data: [{id, title, category, tags, score, snippet}], meta} (reference §2.9); the merged recall reuses it.

    `semantic_path` says which read answered the semantic lane; `ann_iterative_scan` is present only when the
    HNSW index ran (the exact read scans no index), as in memory recall.
    """
    data: list[SearchHitData] = [
        {
            "id": str(hit.article.id),
            "title": hit.article.title,
            "category": hit.article.category,
            "tags": list(hit.article.tags),
            "score": hit.score,
            "snippet": hit.article.snippet,  # type: ignore[attr-defined]  # annotated by ArticleQuerySet.summaries
        }
        for hit in result.hits
    ]
    meta: dict[str, Any] = {
        "total_count": result.total_count,
        "limit": result.limit,
        "offset": result.offset,
        "search_mode": result.search_mode,
        "search_id": str(result.search_id),
        "fallback": result.fallback,
        "fallback_reason": result.fallback_reason,
        "pool_capped": result.pool_capped,
        # The reference's curated-resolver fields: this slice has no curated resolver, so they are always null.
        "total_count_scope": None,
        "remediation": None,
        "importance_strength": None,
        "provenance": None,
    }
    if result.semantic_path is not None:
        meta["semantic_path"] = result.semantic_path
    if result.ann_iterative_scan is not None:
        meta["ann_iterative_scan"] = result.ann_iterative_scan
        if result.ann_iterative_scan_reason:
            meta["ann_iterative_scan_reason"] = result.ann_iterative_scan_reason
    meta["outcome"] = outcome_for(meta, count=len(data), offset=result.offset)
    return {"data": data, "meta": meta}


def _search_query(params: Mapping[str, str]) -> str:
    raw = params.get("q")
    if raw is None:
        raw = params.get("query")
    query = (raw or "").strip()
    if not query:
        raise BadRequest("Query parameter 'q' is required and cannot be empty")
    if len(query) > MAX_QUERY_LENGTH:
        raise BadRequest(f"Query parameter 'q' exceeds maximum length of {MAX_QUERY_LENGTH} characters")
    return query


def _mode(params: Mapping[str, str]) -> SearchMode:
    value = params.get("mode") or "combined"
    for mode in SEARCH_MODES:
        if value == mode:
            return mode
    raise BadRequest(f"Query parameter 'mode' must be one of {', '.join(SEARCH_MODES)}")


def _choice(params: Mapping[str, str], name: str, choices: list[str]) -> str | None:
    value = params.get(name) or None
    if value is not None and value not in choices:
        raise BadRequest(f"Query parameter '{name}' must be one of {', '.join(choices)}")
    return value


def _tags(params: Any) -> list[str]:
    """`tags=a,b` (or repeated `tags=`): trimmed, lowercased, blanks dropped."""
    raw: list[str] = params.getlist("tags")
    return list(dict.fromkeys(t.strip().lower() for value in raw for t in value.split(",") if t.strip()))
