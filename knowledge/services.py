"""Knowledge use cases: propose an article through the novelty gate, and edit it. Embedding is knowledge.embedding."""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from django.conf import settings
from django.db import IntegrityError, transaction

from knowledge import selectors
from knowledge.embedding import EMBED_ARTICLE_TASK
from knowledge.models import (
    MAX_BODY_BYTES,
    MAX_IDEMPOTENCY_KEY_LENGTH,
    MAX_TITLE_LENGTH,
    Article,
    article_embedding_text,
)
from knowledge.selectors import Neighbour
from knowledge.tags import validate_tags
from knowledge.visibility import Viewer
from loopmem.embedding import embedders
from loopmem.embedding.embedders import QueryEmbedding
from loopmem.errors import (
    DuplicateTitle,
    Forbidden,
    GateUnavailable,
    HeavyReadOverloaded,
    InvalidProjectId,
    NotFound,
    ValidationFailed,
)
from loopmem.models import Tenant
from loopmem.params import path_id
from loopmem.runtime.task_queue import enqueue_on_commit
from loopmem.secret_guard.policy import SecretReport, apply_secret_policy
from projects.selectors import project_in_tenant

logger = logging.getLogger(__name__)

Verdict = Literal["created", "gated_to_draft", "duplicate", "deduplicated", "skipped_low_novelty"]
OnLowNovelty = Literal["draft", "skip"]
OnGateUnavailable = Literal["create", "skip"]
CREATE_STATUSES = (Article.Status.DRAFT, Article.Status.PUBLISHED)

_TITLE_INDEX = "articles_tenant_title_active_idx"
_IDEMPOTENCY_INDEX = "articles_idempotency_key_uniq"


@dataclass(frozen=True)
class Proposal:
    """What proposing an article did: the verdict, and the article it concerns (None when skipped with none)."""

    verdict: Verdict
    article: Article | None
    score: float | None = None  # similarity of the nearest visible active article, when the gate ran

    @property
    def created(self) -> bool:
        return self.verdict in ("created", "gated_to_draft")


@dataclass(frozen=True)
class Assessment:
    """The novelty gate's reading of a proposal (reference §4.10 ProposalGate.assess)."""

    verdict: Literal["novel", "low_novelty", "duplicate", "unknown"]
    score: float | None = None
    neighbours: list[Neighbour] = field(default_factory=list)  # those at or above the overlap threshold
    embedding: QueryEmbedding | None = None
    reason: str | None = None  # why the verdict is unknown


def classify(score: float | None) -> Literal["novel", "low_novelty", "duplicate"]:
    """Both thresholds are inclusive: ≥ 0.97 is a duplicate, ≥ 0.88 is low novelty (the settings' values)."""
    if score is None:
        return "novel"
    if score >= settings.KNOWLEDGE_PROPOSAL_DUPLICATE_THRESHOLD:
        return "duplicate"
    if score >= settings.KNOWLEDGE_PROPOSAL_OVERLAP_THRESHOLD:
        return "low_novelty"
    return "novel"


def article_assess(*, viewer: Viewer, tenant: Tenant, text: str, embedding: QueryEmbedding | None) -> Assessment:
    """Compare a proposal with the k nearest active articles the proposer can see. Never raises.

    An embedding failure or a shed read makes the verdict `unknown` (the gate fails open; the caller decides).
    """
    if embedding is None:
        embedded = embedders.embed_query(tenant, text)
        if isinstance(embedded, embedders.EmbeddingFailure):
            return Assessment(verdict="unknown", reason=embedded.tag)
        embedding = embedded
    try:
        found = selectors.article_neighbours(
            viewer=viewer, embedding=embedding, k=settings.KNOWLEDGE_PROPOSAL_NEIGHBORS
        )
    except HeavyReadOverloaded as exc:
        return Assessment(verdict="unknown", reason=exc.code, embedding=embedding)
    near = [n for n in found if n.similarity >= settings.KNOWLEDGE_PROPOSAL_OVERLAP_THRESHOLD]
    score = near[0].similarity if near else None
    return Assessment(verdict=classify(score), score=score, neighbours=near, embedding=embedding)


@dataclass(frozen=True)
class _Draft:
    """A validated proposal, ready to insert."""

    title: str
    body: str
    category: str
    tags: list[str]
    status: str
    visibility: str
    owner_subject_id: str
    project_id: uuid.UUID | None
    metadata: dict[str, Any]
    idempotency_key: str | None

    @property
    def embedding_text(self) -> str:
        return article_embedding_text(self.title, self.body)


def article_propose(
    *,
    viewer: Viewer,
    title: str,
    body: str,
    category: str,
    tags: Sequence[str] = (),
    status: str = Article.Status.DRAFT,
    visibility: str | None = None,
    owner_subject_id: str | None = None,
    project_id: uuid.UUID | None = None,
    metadata: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
    on_low_novelty: OnLowNovelty = "draft",
    on_gate_unavailable: OnGateUnavailable = "create",
    embedding: QueryEmbedding | None = None,
    report: SecretReport | None = None,
) -> Proposal:
    """Write an article through the novelty gate (reference §4.10 propose_article).

    - The same `idempotency_key` from the same owner → `deduplicated` with the existing article, no gate.
    - Nearest visible active article at ≥ 0.97 similarity → `duplicate` (that article; nothing written).
    - ≥ 0.88 → `gated_to_draft` (written as a draft carrying `metadata.proposal_novelty`), or with
      `on_low_novelty="skip"` → `skipped_low_novelty` (the nearest article, nothing written).
    - Otherwise → `created`. The gate's vector is stored, so the article needs no embedding task.
    - The gate cannot assess (embedding down, read shed) → created anyway and embedded later, or with
      `on_gate_unavailable="skip"` → GateUnavailable (503) and nothing written.
    - An active article of the tenant already has the title → DuplicateTitle (409); the unique index
      decides, so two racing proposals cannot both win.

    `visibility` defaults to `shared` for a viewer that sees everything and `owner` for an agent;
    `owner_subject_id` to the viewer's subject. `embedding`, when given (e.g. a graduating memory's vector),
    is used by the gate only: the article's own vector is then computed from its title and body by the task.

    The tenant's secret policy runs first (SecretDetected, or redacted into `report`), before the gate sends
    the text to the embedding provider. A redacted tag then fails the tag rule like any other malformed tag.
    """
    tenant = Tenant.objects.get(id=viewer.tenant_id)
    clean = apply_secret_policy(
        tenant, {"title": title, "body": body, "tags": list(tags) or None, "metadata": metadata}, report=report
    )
    title, body, metadata = clean["title"], clean["body"], clean["metadata"]
    tags = clean["tags"] or ()
    draft = _validated(
        viewer,
        title=title,
        body=body,
        category=category,
        tags=tags,
        status=status,
        visibility=visibility,
        owner_subject_id=owner_subject_id,
        project_id=project_id,
        metadata=metadata,
        idempotency_key=idempotency_key,
    )
    if draft.idempotency_key is not None:
        existing = _by_idempotency_key(viewer, draft)
        if existing is not None:
            return Proposal(verdict="deduplicated", article=existing)

    assessment = article_assess(viewer=viewer, tenant=tenant, text=draft.embedding_text, embedding=embedding)
    # A caller's vector may be of other text (a memory's); only the gate's own vector of this text is stored.
    own_vector = assessment.embedding if embedding is None else None

    if assessment.verdict == "unknown":
        if on_gate_unavailable == "skip":
            raise GateUnavailable(details={"reason": assessment.reason})
        return _insert_article(viewer, draft, verdict="created", vector=own_vector)
    if assessment.verdict == "duplicate":
        canonical = _first_visible(viewer, assessment.neighbours[:1])
        if canonical is not None:
            return Proposal(verdict="duplicate", article=canonical, score=assessment.score)
        # The neighbour vanished since the read (reference §4.10): skip when skipping, else create.
        if on_low_novelty == "skip":
            return _skip(viewer, draft, assessment)
        return _insert_article(viewer, draft, verdict="created", vector=own_vector, score=assessment.score)
    if assessment.verdict == "low_novelty":
        if on_low_novelty == "skip":
            return _skip(viewer, draft, assessment)
        novelty = {
            "verdict": "low_novelty",
            "score": assessment.score,
            "nearest": [{"id": str(n.article_id), "score": n.similarity} for n in assessment.neighbours],
        }
        gated = dataclasses.replace(
            draft, status=Article.Status.DRAFT, metadata={**draft.metadata, "proposal_novelty": novelty}
        )
        return _insert_article(viewer, gated, verdict="gated_to_draft", vector=own_vector, score=assessment.score)
    return _insert_article(viewer, draft, verdict="created", vector=own_vector, score=assessment.score)


def _validated(
    viewer: Viewer,
    *,
    title: str,
    body: str,
    category: str,
    tags: Sequence[str],
    status: str,
    visibility: str | None,
    owner_subject_id: str | None,
    project_id: uuid.UUID | None,
    metadata: dict[str, Any] | None,
    idempotency_key: str | None,
) -> _Draft:
    errors: dict[str, list[str]] = {}
    title = title.strip()
    if not title:
        errors["title"] = ["must not be blank"]
    elif len(title) > MAX_TITLE_LENGTH:
        errors["title"] = [f"at most {MAX_TITLE_LENGTH} characters (got {len(title)})"]
    errors.update(_body_errors(body))
    if category not in Article.Category.values:
        errors["category"] = [f"must be one of {', '.join(Article.Category.values)}"]
    if status not in CREATE_STATUSES:
        errors["status"] = [f"must be one of {', '.join(CREATE_STATUSES)}"]
    visibility = visibility or (Article.Visibility.SHARED if viewer.sees_all else Article.Visibility.OWNER)
    if visibility not in Article.Visibility.values:
        errors["visibility"] = [f"must be one of {', '.join(Article.Visibility.values)}"]
    key = (idempotency_key or "").strip() or None
    if key is not None and len(key) > MAX_IDEMPOTENCY_KEY_LENGTH:
        errors["idempotency_key"] = [f"at most {MAX_IDEMPOTENCY_KEY_LENGTH} characters"]
    try:
        clean_tags = validate_tags(tags)
    except ValidationFailed as exc:
        errors.update(exc.details)
        clean_tags = []
    if errors:
        raise ValidationFailed(details=errors)
    if project_id is not None and project_in_tenant(tenant_id=viewer.tenant_id, project_id=project_id) is None:
        raise InvalidProjectId()
    return _Draft(
        title=title,
        body=body,
        category=category,
        tags=clean_tags,
        status=status,
        visibility=visibility,
        owner_subject_id=owner_subject_id or viewer.subject_id,
        project_id=project_id,
        metadata=metadata or {},
        idempotency_key=key,
    )


def _body_errors(body: str) -> dict[str, list[str]]:
    if not body.strip():
        return {"body": ["must not be blank"]}
    size = len(body.encode())
    if size > MAX_BODY_BYTES:
        return {"body": [f"exceeds maximum size of {MAX_BODY_BYTES} bytes (got {size})"]}
    return {}


def _by_idempotency_key(viewer: Viewer, draft: _Draft) -> Article | None:
    # The key belongs to its writer: the lookup is by (tenant, owner, key), and the owner sees its own rows.
    return (
        Article.objects.visible_to(viewer)
        .filter(owner_subject_id=draft.owner_subject_id, idempotency_key=draft.idempotency_key)
        .defer("embedding", "search_vector")
        .first()
    )


def _first_visible(viewer: Viewer, neighbours: Sequence[Neighbour]) -> Article | None:
    """The first neighbour that still exists and is visible, in neighbour order (on the primary)."""
    ids = [n.article_id for n in neighbours]
    found = {a.id: a for a in Article.objects.visible_to(viewer).defer("embedding", "search_vector").filter(id__in=ids)}
    return next((found[i] for i in ids if i in found), None)


def _skip(viewer: Viewer, draft: _Draft, assessment: Assessment) -> Proposal:
    """Reference §4.10's skip path: nothing is written, but a taken title is still reported."""
    holder = _active_title_holder(viewer.tenant_id, draft.title)
    if holder is not None:
        visible = Article.objects.visible_to(viewer).filter(id=holder.id).exists()
        if visible and holder.body == draft.body:
            return Proposal(verdict="deduplicated", article=holder, score=assessment.score)
        raise _duplicate_title(holder, visible=visible)
    nearest = _first_visible(viewer, assessment.neighbours)
    return Proposal(verdict="skipped_low_novelty", article=nearest, score=assessment.score)


def _active_title_holder(tenant_id: uuid.UUID, title: str) -> Article | None:
    # Tenant-wide on purpose: the unique index is, so a hidden article's title is taken too.
    return Article.objects.filter(tenant_id=tenant_id, title=title).active().defer("embedding", "search_vector").first()


def _duplicate_title(holder: Article | None, *, visible: bool) -> DuplicateTitle:
    details = {"article_id": str(holder.id)} if holder is not None and visible else {}
    return DuplicateTitle(details=details)


def _title_taken(viewer: Viewer, title: str) -> DuplicateTitle:
    """The 409 for a title the unique index refused, naming its holder when the viewer may see it."""
    holder = _active_title_holder(viewer.tenant_id, title)
    visible = holder is not None and Article.objects.visible_to(viewer).filter(id=holder.id).exists()
    return _duplicate_title(holder, visible=visible)


def _insert_article(
    viewer: Viewer, draft: _Draft, *, verdict: Verdict, vector: QueryEmbedding | None, score: float | None = None
) -> Proposal:
    """The one writer of an article row (every proposal, graduation's included): stored with `vector` when the gate
    embedded this very text, else queued for embedding after commit. The unique indexes decide a race: a taken
    title is DuplicateTitle, a taken idempotency key answers with the article that holds it."""
    embedded: dict[str, Any] = {}
    if vector is not None:
        embedded = {
            "embedding": vector.vector,
            "embedding_model": vector.model_id,
            "embedding_content_hash": embedders.content_hash(draft.embedding_text),
        }
    try:
        with transaction.atomic():
            article = Article.objects.create(
                tenant_id=viewer.tenant_id,
                project_id=draft.project_id,
                title=draft.title,
                body=draft.body,
                category=draft.category,
                tags=draft.tags,
                status=draft.status,
                visibility=draft.visibility,
                owner_subject_id=draft.owner_subject_id,
                metadata=draft.metadata,
                idempotency_key=draft.idempotency_key,
                **embedded,
            )
            if vector is None:
                enqueue_on_commit(EMBED_ARTICLE_TASK, str(article.id))
    except IntegrityError as exc:
        violated = _violated_constraint(exc)
        if violated not in (_TITLE_INDEX, _IDEMPOTENCY_INDEX):
            raise
        # A racing proposal committed first. If it carried our idempotency key it is our answer, whichever of
        # the two unique indexes Postgres happened to check first; otherwise the title is taken.
        existing = _by_idempotency_key(viewer, draft) if draft.idempotency_key is not None else None
        if existing is not None:
            return Proposal(verdict="deduplicated", article=existing)
        if violated == _TITLE_INDEX:
            raise _title_taken(viewer, draft.title) from exc
        raise
    return Proposal(verdict=verdict, article=article, score=score)


def _violated_constraint(exc: IntegrityError) -> str | None:
    diag = getattr(exc.__cause__, "diag", None)
    return getattr(diag, "constraint_name", None)


# --- Editing -----------------------------------------------------------------------------------------------


def article_update(
    *,
    viewer: Viewer,
    article_id: str,
    title: str | None = None,
    body: str | None = None,
    tags: Sequence[str] | None = None,
    status: str | None = None,
    report: SecretReport | None = None,
) -> Article:
    """Change an article's title, body, tags or status (None leaves a field as it is).

    An agent may change only the articles it owns; user, orchestrator and superadmin keys any of the
    tenant's. A hidden article is a 404; a visible one the agent does not own is a 403. A changed title or
    body drops the vector and re-embeds after commit, so the article is never found by stale meaning.
    The tenant's secret policy runs first over the fields given (SecretDetected, or redacted into `report`).
    """
    clean = apply_secret_policy(
        viewer.tenant_id, {"title": title, "body": body, "tags": None if tags is None else list(tags)}, report=report
    )
    title, body = clean["title"], clean["body"]
    tags = clean["tags"]
    errors: dict[str, list[str]] = {}
    if title is not None:
        title = title.strip()
        if not title:
            errors["title"] = ["must not be blank"]
        elif len(title) > MAX_TITLE_LENGTH:
            errors["title"] = [f"at most {MAX_TITLE_LENGTH} characters (got {len(title)})"]
    if body is not None:
        errors.update(_body_errors(body))
    if status is not None and status not in Article.Status.values:
        errors["status"] = [f"must be one of {', '.join(Article.Status.values)}"]
    clean_tags: list[str] | None = None
    if tags is not None:
        try:
            clean_tags = validate_tags(tags)
        except ValidationFailed as exc:
            errors.update(exc.details)
    if errors:
        raise ValidationFailed(details=errors)

    parsed = path_id(article_id)
    final_title: str | None = None  # the title the save tried to hold, for a 409 naming its holder
    try:
        with transaction.atomic():
            article = (
                Article.objects.editable_by(viewer)
                .select_for_update()
                .defer("embedding", "search_vector")
                .filter(id=parsed)
                .first()
            )
            if article is None:
                if Article.objects.visible_to(viewer).filter(id=parsed).exists():
                    raise Forbidden("Only the article's owner (or a user or orchestrator key) may change it")
                raise NotFound()
            changed: list[str] = []
            for name, value in (("title", title), ("body", body), ("tags", clean_tags), ("status", status)):
                if value is not None and getattr(article, name) != value:
                    setattr(article, name, value)
                    changed.append(name)
            if {"title", "body"} & set(changed):
                article.embedding = None
                article.embedding_model = ""
                article.embedding_content_hash = None
                changed += ["embedding", "embedding_model", "embedding_content_hash"]
                enqueue_on_commit(EMBED_ARTICLE_TASK, str(article.id))
            if changed:
                final_title = article.title
                article.save(update_fields=[*changed, "updated_at"])
    except IntegrityError as exc:
        if _violated_constraint(exc) != _TITLE_INDEX or final_title is None:
            raise
        raise _title_taken(viewer, final_title) from exc
    return selectors.article_get(viewer=viewer, article_id=str(parsed))
