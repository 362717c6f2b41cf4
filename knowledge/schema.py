"""OpenAPI for /api/v1/knowledge: each operation's request, its success envelope and every error it can give."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import serializers

from knowledge.models import MAX_BODY_BYTES, MAX_IDEMPOTENCY_KEY_LENGTH, MAX_TITLE_LENGTH, Article
from knowledge.selectors import SEARCH_MODES
from knowledge.serializers import ArticleOut, ArticlePatchIn, ArticleProposeIn, ArticleSummaryOut
from knowledge.tags import MAX_TAG_LENGTH, MAX_TAGS
from loopmem.errors import (
    BadRequest,
    DuplicateTitle,
    EmbeddingUnavailable,
    Forbidden,
    GateUnavailable,
    InvalidProjectId,
    NotFound,
    SecretDetected,
    ValidationFailed,
)
from loopmem.http.inputs import QUERY_PATTERN, TextField
from loopmem.http.openapi import OUTCOME, PAGE_PARAMETERS, ROW_ID, data_envelope, page, project_id_parameter, responses
from loopmem.params import MAX_QUERY_CHARS, NOT_BLANK_PATTERN, trimmed_text_pattern

# What the service accepts (knowledge.services, knowledge.tags): the serializers check only shapes.
TAGS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "maxItems": MAX_TAGS,
    "items": {
        "type": "string",
        "maxLength": MAX_TAG_LENGTH,
        "pattern": r"^\s*[A-Za-z0-9][A-Za-z0-9_.:-]*\s*$",
        "description": "trimmed and lowercased; `idem-*` tags of the wrong shape are dropped",
    },
}


# The service trims a title and an idempotency key before it counts them: a pattern states that, `maxLength` cannot.
@extend_schema_field(
    {
        "type": "string",
        "pattern": trimmed_text_pattern(MAX_TITLE_LENGTH),
        "description": f"not blank, at most {MAX_TITLE_LENGTH} characters once trimmed",
    }
)
class ArticleTitleField(TextField):
    """Documentation only: an article's title as the service accepts it."""


@extend_schema_field(
    {
        "type": "string",
        "minLength": 1,
        "pattern": NOT_BLANK_PATTERN,
        "description": f"not blank, at most {MAX_BODY_BYTES} bytes of UTF-8",
    }
)
class ArticleBodyField(TextField):
    """Documentation only: an article's body as the service accepts it."""


@extend_schema_field(
    {
        "type": "string",
        "pattern": trimmed_text_pattern(MAX_IDEMPOTENCY_KEY_LENGTH, blank=True),
        "nullable": True,
        "description": f"at most {MAX_IDEMPOTENCY_KEY_LENGTH} characters once trimmed; blank is none",
    }
)
class ArticleIdempotencyKeyField(serializers.Field):  # type: ignore[type-arg]
    """Documentation only: a proposal's idempotency key as the service accepts it (not a CharField, which would
    add a blank alternative that its pattern already holds)."""


@extend_schema_field(TAGS_SCHEMA)
class ArticleTagsField(serializers.ListField):
    """Documentation only: an article's tags as the service accepts them."""


class ArticleProposeBodyIn(ArticleProposeIn):
    """POST /api/v1/knowledge/articles, with the service's rules on title, body and tags in the schema."""

    title = ArticleTitleField()
    body = ArticleBodyField()
    # Documentation only (the service parses with ArticleProposeIn's field).
    idempotency_key = ArticleIdempotencyKeyField(required=False, allow_null=True)  # type: ignore[assignment]
    tags = ArticleTagsField(required=False)


class ArticlePatchBodyIn(ArticlePatchIn):
    """PATCH /api/v1/knowledge/articles/:id, with the service's rules on title, body and tags in the schema."""

    title = ArticleTitleField(required=False)
    body = ArticleBodyField(required=False)
    tags = ArticleTagsField(required=False)


def proposal_out(**kwargs: Any) -> Any:
    """{data: {verdict, created, article}}: the novelty gate's answer to a proposal (and to a graduation)."""
    return data_envelope(
        "ArticleProposalOut",
        inline_serializer(
            "ArticleProposal",
            {
                "verdict": serializers.CharField(),
                "created": serializers.BooleanField(),
                "article": ArticleSummaryOut(allow_null=True),
            },
        ),
        write=True,
    )


PROPOSAL_OUT = proposal_out()
# A proposal's answers (a propose, a graduation): 201 when the novelty gate let the article be created, else 200.
PROPOSAL_ANSWERS: dict[int | tuple[int, str], Any] = {
    200: OpenApiResponse(PROPOSAL_OUT, description="not created (the novelty gate's verdict says why)"),
    201: OpenApiResponse(PROPOSAL_OUT, description="an article was created"),
}

SEARCH_OUT = inline_serializer(
    "KnowledgeSearchOut",
    {
        "data": inline_serializer(
            "KnowledgeSearchHit",
            {
                "id": serializers.UUIDField(),
                "title": serializers.CharField(),
                "category": serializers.ChoiceField(choices=Article.Category.values),
                "tags": serializers.ListField(child=serializers.CharField()),
                "score": serializers.FloatField(allow_null=True),
                "snippet": serializers.CharField(allow_blank=True),
            },
            many=True,
        ),
        "meta": inline_serializer(
            "KnowledgeSearchMeta",
            {
                "total_count": serializers.IntegerField(),
                "limit": serializers.IntegerField(),
                "offset": serializers.IntegerField(),
                "search_mode": serializers.CharField(allow_null=True),
                "search_id": serializers.UUIDField(),
                "fallback": serializers.BooleanField(),
                "fallback_reason": serializers.CharField(allow_null=True),
                "pool_capped": serializers.BooleanField(),
                "provenance": serializers.ChoiceField(choices=["curated", "retrieved"], allow_null=True),
                "curated_article_id": serializers.UUIDField(allow_null=True),
                "confidence": serializers.FloatField(allow_null=True),
                "importance_strength": serializers.FloatField(allow_null=True),
                "diversity": serializers.DictField(required=False),
                "outcome": OUTCOME,
            },
        ),
    },
)

LIST_FILTERS = [
    OpenApiParameter("category", str, enum=[*Article.Category.values, ""], description="blank is absent"),
    OpenApiParameter("tags", str, description="comma-separated; an article must carry all of them"),
]

article_schema = extend_schema_view(
    create=extend_schema(
        request=ArticleProposeBodyIn,
        responses=responses(
            PROPOSAL_ANSWERS,
            ValidationFailed,
            InvalidProjectId,
            DuplicateTitle,
            SecretDetected,
            GateUnavailable,
            body=True,
            write=True,
        ),
    ),
    list=extend_schema(
        parameters=[
            *PAGE_PARAMETERS,
            OpenApiParameter("status", str, enum=[*Article.Status.values, ""], description="blank is absent"),
            *LIST_FILTERS,
            project_id_parameter("that project's articles only; blank is every article"),
        ],
        responses=responses(
            {200: page("ArticlePage", ArticleSummaryOut())}, BadRequest, InvalidProjectId, ValidationFailed
        ),
    ),
    retrieve=extend_schema(
        parameters=[ROW_ID], responses=responses({200: data_envelope("ArticleGetOut", ArticleOut())}, NotFound)
    ),
    partial_update=extend_schema(
        request=ArticlePatchBodyIn,
        parameters=[ROW_ID],
        responses=responses(
            {200: data_envelope("ArticlePatchOut", ArticleOut(), write=True)},
            NotFound,
            Forbidden,
            DuplicateTitle,
            ValidationFailed,
            SecretDetected,
            body=True,
            write=True,
        ),
    ),
)

search_schema = extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter(
                "q",
                str,
                required=True,
                pattern=QUERY_PATTERN,
                description=f"not blank, at most {MAX_QUERY_CHARS} characters once trimmed (400 `bad_request`); "
                "`query` is an alias",
            ),
            OpenApiParameter("mode", str, enum=[*SEARCH_MODES, ""], description="blank is combined"),
            project_id_parameter("the global articles plus this project's; blank is the global articles only"),
            *LIST_FILTERS,
            *PAGE_PARAMETERS,
        ],
        responses=responses({200: SEARCH_OUT}, BadRequest, InvalidProjectId, EmbeddingUnavailable),
    ),
)
