"""OpenAPI for /api/v1/recall: merged recall and its `referenced` report, with every error each can give."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import serializers

from knowledge.schema import SEARCH_OUT
from loopmem.errors import (
    EmbeddingUnavailable,
    HeavyReadOverloaded,
    InvalidArticleIds,
    InvalidProjectId,
    InvalidQuery,
    InvalidRecallId,
    InvalidSessionId,
    NotSurfaced,
    QueryTooLong,
    RecordingFailed,
    TooManyArticleIds,
    ValidationFailed,
)
from loopmem.http.openapi import OUTCOME, data_envelope, responses
from memory.schema import RECALL_OUT
from memory.serializers import MemoryOut
from recall.serializers import RecallContextIn, ReferencedIn


# RecallContextIn's fields as they are: a class of its own for the published component's name and description.
class RecallContextBodyIn(RecallContextIn):
    """POST /api/v1/recall, as the schema shows it."""


class ReferencedBodyIn(ReferencedIn):
    """POST /api/v1/recall/:recall_id/referenced: the body (the recall id is the path's)."""

    recall_id = None  # type: ignore[assignment]  # the path's, not the body's


MERGED_ITEM = inline_serializer(
    "MergedRecallItem",
    {
        "source": serializers.ChoiceField(choices=["memory", "knowledge"]),
        "score": serializers.FloatField(allow_null=True),
        "rank": serializers.IntegerField(),
        "selection_reason": serializers.CharField(allow_null=True),
        "tokens_estimate": serializers.IntegerField(),
        "memory": MemoryOut(required=False),
        "article": serializers.DictField(
            required=False, help_text="{id, title, category, tags, score, snippet}: a knowledge item"
        ),
    },
    many=True,
)
MERGED_OUT = inline_serializer(
    "MergedRecallOut",
    {
        "data": MERGED_ITEM,
        "memory": RECALL_OUT,
        "knowledge": SEARCH_OUT,
        "meta": inline_serializer(
            "MergedRecallMeta",
            {
                "query": serializers.CharField(),
                "project_id": serializers.UUIDField(allow_null=True),
                "total_count": serializers.IntegerField(),
                "memory_count": serializers.IntegerField(),
                "knowledge_count": serializers.IntegerField(),
                "degraded": serializers.BooleanField(),
                "degraded_reason": serializers.CharField(allow_null=True),
                "search_mode": serializers.CharField(allow_null=True),
                "results_ranking": serializers.CharField(),
                "answer_confidence": serializers.CharField(),
                "recall_id": serializers.UUIDField(),
                "candidates_considered": serializers.DictField(child=serializers.IntegerField()),
                "selected_count": serializers.IntegerField(),
                "tokens_selected": serializers.IntegerField(),
                "tokens_candidates": serializers.IntegerField(),
                "tokens_saved_vs_candidates": serializers.IntegerField(),
                "diversity": serializers.DictField(allow_null=True),
                "provenance": serializers.ChoiceField(choices=["curated", "retrieved"], allow_null=True),
                "confidence": serializers.FloatField(allow_null=True),
                "importance_strength": serializers.FloatField(allow_null=True),
                "outcome": OUTCOME,
            },
        ),
    },
)
REFERENCED_OUT = data_envelope(
    "RecallReferencedOut",
    inline_serializer(
        "RecallReferenced",
        {
            "recall_id": serializers.UUIDField(),
            "article_ids": serializers.ListField(child=serializers.UUIDField()),
            "recorded": serializers.IntegerField(),
        },
    ),
)

recall_schema = extend_schema_view(
    # A read sent as POST: exempt from the custody halt.
    create=extend_schema(
        request=RecallContextBodyIn,
        responses=responses(
            {200: MERGED_OUT},
            InvalidProjectId,
            InvalidQuery,
            QueryTooLong,
            InvalidSessionId,
            ValidationFailed,
            HeavyReadOverloaded,
            EmbeddingUnavailable,
            body=True,
        ),
    ),
    referenced=extend_schema(
        parameters=[OpenApiParameter("recall_id", OpenApiTypes.UUID, OpenApiParameter.PATH)],
        request=ReferencedBodyIn,
        responses=responses(
            {200: REFERENCED_OUT},
            InvalidProjectId,
            InvalidRecallId,
            InvalidArticleIds,
            TooManyArticleIds,
            NotSurfaced,
            RecordingFailed,
            body=True,
            write=True,
        ),
    ),
)
