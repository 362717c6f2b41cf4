"""Knowledge wire shapes: article input for propose and patch, article output, search hits."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from knowledge.models import Article
from knowledge.selectors import DEFAULT_SEARCH_LIMIT, MAX_QUERY_LENGTH, MAX_SEARCH_LIMIT, SEARCH_MODES
from knowledge.services import CREATE_STATUSES
from loopmem.errors import BadRequest
from loopmem.http.inputs import ProjectIdField, TextField, WireField
from loopmem.params import MAX_OFFSET, clamp, lenient_int


class ArticleProposeIn(serializers.Serializer):  # type: ignore[type-arg]  # plain input serializer
    """POST /api/v1/knowledge/articles; validated_data maps onto knowledge.services.article_propose.

    Shapes and choices only; the domain rules (title length, body size, tags) live in the service so every
    writer (graduation too) gets them.
    """

    project_id = ProjectIdField()  # first: a malformed project id is refused before anything else
    # Blank title and body pass here: the service says "must not be blank" for every writer alike.
    title = TextField(allow_blank=True, trim_whitespace=False)
    body = TextField(allow_blank=True, trim_whitespace=False)
    category = serializers.ChoiceField(choices=Article.Category.choices)
    tags = serializers.ListField(child=serializers.CharField(trim_whitespace=False), required=False, default=list)
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


class TagsField(serializers.Field):  # type: ignore[type-arg]
    """`tags=a,b` (or repeated `tags=`): trimmed, lowercased, blanks dropped."""

    def get_value(self, dictionary: Any) -> Any:
        return dictionary.getlist(self.field_name) if hasattr(dictionary, "getlist") else dictionary.get("tags", [])

    def to_internal_value(self, data: Any) -> list[str]:
        raw = [data] if isinstance(data, str) else list(data or [])
        return list(dict.fromkeys(t.strip().lower() for value in raw for t in str(value).split(",") if t.strip()))

    def to_representation(self, value: Any) -> Any:
        return value


def _search_query(value: object) -> str:
    query = (value if isinstance(value, str) else "").strip()
    if not query:
        raise BadRequest("Query parameter 'q' is required and cannot be empty")
    if len(query) > MAX_QUERY_LENGTH:
        raise BadRequest(f"Query parameter 'q' exceeds maximum length of {MAX_QUERY_LENGTH} characters")
    return query


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
    tags = TagsField(required=False, default=list)


class KnowledgeSearchIn(serializers.Serializer):  # type: ignore[type-arg]
    """GET /api/v1/knowledge/search query parameters, checked in this order."""

    project_id = ProjectIdField()
    query = WireField(_search_query)  # `q`, or its alias `query`: see `knowledge_search_params`
    mode = WireField(_mode, schema={"type": "string", "enum": [*SEARCH_MODES, ""]})
    category = _choice("category", Article.Category.values)
    tags = TagsField(required=False, default=list)
    limit = WireField(lambda v: clamp(lenient_int(v, DEFAULT_SEARCH_LIMIT), 1, MAX_SEARCH_LIMIT))
    offset = WireField(lambda v: clamp(lenient_int(v, 0), 0, MAX_OFFSET))


class ArticlePatchIn(serializers.Serializer):  # type: ignore[type-arg]  # plain input serializer
    """PATCH /api/v1/knowledge/articles/:id; absent fields stay as they are."""

    title = TextField(required=False, allow_blank=True, trim_whitespace=False)
    body = TextField(required=False, allow_blank=True, trim_whitespace=False)
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
