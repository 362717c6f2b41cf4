"""Knowledge wire shapes: article input for propose and patch, article output, search hits."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from knowledge.models import Article
from knowledge.services import CREATE_STATUSES


class ArticleProposeIn(serializers.Serializer):  # type: ignore[type-arg]  # plain input serializer
    """POST /api/v1/knowledge/articles; validated_data maps onto knowledge.services.article_propose.

    Shapes and choices only; the domain rules (title length, body size, tags) live in the service so every
    writer (graduation too) gets them.
    """

    # Blank title and body pass here: the service says "must not be blank" for every writer alike.
    title = serializers.CharField(allow_blank=True, trim_whitespace=False)
    body = serializers.CharField(allow_blank=True, trim_whitespace=False)
    category = serializers.ChoiceField(choices=Article.Category.choices)
    tags = serializers.ListField(child=serializers.CharField(trim_whitespace=False), required=False, default=list)
    status = serializers.ChoiceField(choices=CREATE_STATUSES, default=Article.Status.DRAFT)
    visibility = serializers.ChoiceField(choices=Article.Visibility.choices, required=False, allow_null=True)
    metadata = serializers.DictField(required=False, allow_null=True)
    idempotency_key = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    on_low_novelty = serializers.ChoiceField(choices=["draft", "skip"], default="draft")
    on_gate_unavailable = serializers.ChoiceField(choices=["create", "skip"], default="create")

    def validate_metadata(self, value: dict[str, Any] | None) -> dict[str, Any]:
        return value or {}


class ArticlePatchIn(serializers.Serializer):  # type: ignore[type-arg]  # plain input serializer
    """PATCH /api/v1/knowledge/articles/:id; absent fields stay as they are."""

    title = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    body = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    tags = serializers.ListField(child=serializers.CharField(trim_whitespace=False), required=False)
    status = serializers.ChoiceField(choices=Article.Status.choices, required=False)


SUMMARY_FIELDS = [
    "id",
    "tenant_id",
    "project_id",
    "title",
    "category",
    "status",
    "tags",
    "visibility",
    "owner_subject_id",
    "metadata",
    "idempotency_key",
    "inserted_at",
    "updated_at",
]


class ArticleSummaryOut(serializers.ModelSerializer):  # type: ignore[type-arg]
    """An article without its body (and never its vector): lists and the propose answer."""

    tenant_id = serializers.UUIDField(read_only=True)
    project_id = serializers.UUIDField(read_only=True, allow_null=True)

    class Meta:
        model = Article
        fields = SUMMARY_FIELDS


class ArticleOut(ArticleSummaryOut):
    """The full article: GET one, PATCH."""

    class Meta:
        model = Article
        fields = [*SUMMARY_FIELDS[:4], "body", *SUMMARY_FIELDS[4:]]
