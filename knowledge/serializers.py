"""Knowledge wire shapes: article input for propose and patch, article output, search hits."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from knowledge.models import Article
from knowledge.selectors import DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT, SEARCH_MODES
from knowledge.services import CREATE_STATUSES
from loopmem.errors import BadRequest
from loopmem.http.inputs import ProjectIdField, QueryField, TextField, WireField, split_tags
from loopmem.params import MAX_OFFSET, MAX_QUERY_CHARS, clamp, lenient_int

# --- An article's title, body and tags: one rule each, for a proposal and a patch alike --------------------------
# Shapes only: a blank title or body passes here, and the service says "must not be blank" for every writer alike.


def article_text(**kwargs: Any) -> TextField:
    """A title or a body: text as sent (the service trims and counts it)."""
    return TextField(allow_blank=True, trim_whitespace=False, **kwargs)


def article_tags(**kwargs: Any) -> serializers.ListField:
    """An article's tags: a list of strings as sent (the service normalises and bounds them)."""
    return serializers.ListField(child=serializers.CharField(trim_whitespace=False), required=False, **kwargs)


class ArticleProposeIn(serializers.Serializer):  # type: ignore[type-arg]  # plain input serializer
    """POST /api/v1/knowledge/articles; validated_data maps onto knowledge.services.article_propose.

    Shapes and choices only; the domain rules (title length, body size, tags) live in the service so every
    writer (graduation too) gets them.
    """

    project_id = ProjectIdField()  # first: a malformed project id is refused before anything else
    title = article_text()
    body = article_text()
    category = serializers.ChoiceField(choices=Article.Category.choices)
    tags = article_tags(default=list)
    # An article is born in one of the creation statuses only (a patch may move it to any other).
    status = serializers.ChoiceField(choices=CREATE_STATUSES, default=Article.Status.DRAFT)
    visibility = serializers.ChoiceField(choices=Article.Visibility.choices, required=False, allow_null=True)
    metadata = serializers.DictField(required=False, allow_null=True)
    idempotency_key = TextField(required=False, allow_null=True, allow_blank=True)
    on_low_novelty = serializers.ChoiceField(choices=["draft", "skip"], default="draft")
    on_gate_unavailable = serializers.ChoiceField(choices=["create", "skip"], default="create")

    def validate_metadata(self, value: dict[str, Any] | None) -> dict[str, Any]:
        return value or {}


def _choice(name: str, choices: list[str]) -> WireField:
    """An optional query parameter from a closed set; blank is absent, anything else 400 `bad_request`."""

    def rule(value: object) -> str | None:
        if value is None or value == "":
            return None
        if value not in choices:
            raise BadRequest(f"Query parameter '{name}' must be one of {', '.join(choices)}")
        return str(value)

    return WireField(rule, schema={"type": "string", "enum": [*choices, ""], "description": "blank is absent"})


class ArticleTagsFilterField(serializers.Field):  # type: ignore[type-arg]
    """Tags an article must all carry, as a query string gives them (`split_tags`): normalised as stored tags are
    (trimmed, lowercased, deduplicated), blanks dropped; unbounded, as a tag no article has only matches none."""

    def get_value(self, dictionary: Any) -> Any:
        if hasattr(dictionary, "getlist"):
            return dictionary.getlist(self.field_name)
        return dictionary.get(self.field_name, [])

    def to_internal_value(self, data: Any) -> list[str]:
        raw = [data] if isinstance(data, str) else list(data or [])
        return list(dict.fromkeys(tag.strip().lower() for tag in split_tags(raw) if tag.strip()))

    def to_representation(self, value: Any) -> Any:
        return value


def _query_missing() -> BadRequest:
    return BadRequest("Query parameter 'q' is required and cannot be empty")


def _query_too_long() -> BadRequest:
    return BadRequest(f"Query parameter 'q' exceeds maximum length of {MAX_QUERY_CHARS} characters")


def _mode(value: object) -> str:
    mode = value or "combined"
    if mode not in SEARCH_MODES:
        raise BadRequest(f"Query parameter 'mode' must be one of {', '.join(SEARCH_MODES)}")
    return str(mode)


class ArticleListIn(serializers.Serializer):  # type: ignore[type-arg]
    """GET /api/v1/knowledge/articles query parameters (limit and offset are read by page_params)."""

    project_id = ProjectIdField()
    status = _choice("status", Article.Status.values)
    category = _choice("category", Article.Category.values)
    tags = ArticleTagsFilterField(required=False, default=list)


class KnowledgeSearchIn(serializers.Serializer):  # type: ignore[type-arg]
    """GET /api/v1/knowledge/search query parameters, checked in this order."""

    project_id = ProjectIdField()
    # `q`, or its alias `query` (knowledge.api joins them); its schema is the `q` parameter's (knowledge.schema).
    query = QueryField(missing=_query_missing, too_long=_query_too_long)
    mode = WireField(_mode, schema={"type": "string", "enum": [*SEARCH_MODES, ""]})
    category = _choice("category", Article.Category.values)
    tags = ArticleTagsFilterField(required=False, default=list)
    limit = WireField(lambda v: clamp(lenient_int(v, DEFAULT_SEARCH_LIMIT), 1, MAX_SEARCH_LIMIT))
    offset = WireField(lambda v: clamp(lenient_int(v, 0), 0, MAX_OFFSET))


class ArticlePatchIn(serializers.Serializer):  # type: ignore[type-arg]  # plain input serializer
    """PATCH /api/v1/knowledge/articles/:id; absent fields stay as they are."""

    title = article_text(required=False)
    body = article_text(required=False)
    tags = article_tags()
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
