"""The world the stateful isolation suite acts in, and its oracle.

Three tenants, each with two agents named alike in every tenant (`agent-a`, `agent-b`), an orchestrator key that
carries `agent-a` (it is its own subject, reference §4.1), a user key, two projects; one superadmin key that
impersonates each tenant in turn. Every text written carries a token unique to that write (`tok<n>`), so the
oracle can tell, from a response body alone, whose row it is showing.

The oracle reads the truth from the database with plain filters (never the service's own scoping verbs):

- `reach`: what an actor may read at most. Memories and session turns of its own (tenant, subject); a
  superadmin's the whole impersonated tenant's; articles as `docs/knowledge.md` says (an agent: its tenant's
  published shared ones and its own; every other role: the whole tenant).
- `leaks_in`: every row id, key id and write token in a response must belong to that reach (or have been sent
  by the caller in its own request): an id of any other row is a leak, whatever field it hides in.
- `snapshot` / `changes_outside`: a digest of every row keyed by the (tenant, subject) that owns it; after an
  action only the actor's own region may differ.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache
from django.db import connection
from rest_framework.test import APIClient

from knowledge.models import Article, ArticleAccessEvent
from loopmem.models import ApiKey, Tenant
from loopmem.tenancy.scope import Scope
from loopmem.tenancy.services import api_key_create
from memory.models import Memory, PromotionJob, SessionTurn
from memory.services import memory_remember
from memory.session_tier import session_append
from projects.models import Project

TENANT_COUNT = 3
AGENT_IDS = ("agent-a", "agent-b")
PROJECTS_PER_TENANT = 2
# Shared by every scope, so a semantic or keyword read that ignored the scope would find foreign rows.
WORDS = ("deploy", "vault", "staging", "postgres", "release", "rollback", "cache", "ticket", "review", "schema")
TOKEN = re.compile(r"\btok\d+\b")

ANY_SUBJECT = "*"


@dataclass
class Actor:
    """One key acting in one tenant: its API client, and (agents) its MCP tools."""

    name: str
    role: str
    tenant_index: int
    tenant_id: uuid.UUID
    subject_id: str
    key_id: uuid.UUID
    raw_key: str
    client: APIClient
    impersonating: bool = False

    @property
    def sees_whole_tenant_memories(self) -> bool:
        """Addressing by id, listing all subjects and forgetting: a superadmin reaches the whole tenant."""
        return self.role == ApiKey.Role.SUPERADMIN

    @property
    def sees_whole_tenant_articles(self) -> bool:
        return self.role != ApiKey.Role.AGENT

    @property
    def region(self) -> tuple[uuid.UUID, str]:
        """The (tenant, subject) rows this actor may change; a superadmin may change any subject of its tenant."""
        return (self.tenant_id, ANY_SUBJECT if self.sees_whole_tenant_memories else self.subject_id)


@dataclass
class World:
    tenants: list[Tenant]
    projects: list[list[Project]]  # by tenant index
    actors: list[Actor]
    subject_of_key: dict[uuid.UUID, str] = field(default_factory=dict)
    tokens_issued: int = 0

    def token(self) -> str:
        self.tokens_issued += 1
        return f"tok{self.tokens_issued}"

    def text(self, words: Iterable[str]) -> str:
        """A text over the shared vocabulary, carrying a fresh token."""
        return f"{' '.join(words)} {self.token()}"


def reset_database() -> None:
    """Each example starts from an empty service: every tenant and what hangs off it, and Redis."""
    tables = [
        Tenant._meta.db_table,
        ApiKey._meta.db_table,
        Memory._meta.db_table,
        SessionTurn._meta.db_table,
        PromotionJob._meta.db_table,
        "session_promotions",
        Article._meta.db_table,
        ArticleAccessEvent._meta.db_table,
        Project._meta.db_table,
    ]
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(tables)} CASCADE")
    cache.clear()  # rate-limit counters, recall history, recall-bump cooldowns, circuit breakers


def build_world() -> World:
    """Three tenants with the same agent names, their projects and keys, and a superadmin for each."""
    tenants = [Tenant.objects.create(name=f"Tenant {i}", slug=f"iso-{i}") for i in range(TENANT_COUNT)]
    projects = [
        [Project.objects.create(tenant=t, name=f"P{i}{j}", slug=f"p-{i}-{j}") for j in range(PROJECTS_PER_TENANT)]
        for i, t in enumerate(tenants)
    ]
    actors: list[Actor] = []
    superadmin = api_key_create(role="superadmin", tenant=None, agent_id=None)
    for index, tenant in enumerate(tenants):
        keys = [(agent_id, api_key_create(role="agent", tenant=tenant, agent_id=agent_id)) for agent_id in AGENT_IDS]
        keys.append(("orchestrator", api_key_create(role="orchestrator", tenant=tenant, agent_id="agent-a")))
        keys.append(("user", api_key_create(role="user", tenant=tenant, agent_id=None)))
        for name, issued in keys:
            row = ApiKey.objects.get(key_hash=_hash(issued.raw_key))
            subject = row.agent_id if row.role == ApiKey.Role.AGENT else str(row.id)
            actors.append(_actor(f"{name}@{index}", row, issued.raw_key, tenant, index, subject))
        sa_row = ApiKey.objects.get(key_hash=_hash(superadmin.raw_key))
        actors.append(
            _actor(f"superadmin@{index}", sa_row, superadmin.raw_key, tenant, index, str(sa_row.id), impersonate=True)
        )
    world = World(tenants=tenants, projects=projects, actors=actors)
    world.subject_of_key = {actor.key_id: actor.subject_id for actor in actors}
    _seed(world)
    return world


def _seed(world: World) -> None:
    """Rows in every scope before the first step, so every read has foreign rows to leak and every by-id probe a
    foreign row to aim at: per actor a global and a project memory and two turns of `s1`; per tenant an article
    of each visibility and status, owned by different subjects. Written by the services, as the API would."""
    for n, actor in enumerate(world.actors):
        projects = world.projects[actor.tenant_index]
        for project in (None, projects[n % len(projects)]):
            scope = Scope(
                tenant_id=actor.tenant_id, subject_id=actor.subject_id, project_id=project.id if project else None
            )
            memory_remember(scope=scope, text=world.text(WORDS[n % 5 : n % 5 + 3]), tags=["ops"])
        scope = Scope(tenant_id=actor.tenant_id, subject_id=actor.subject_id)
        for role in ("user", "fact"):
            session_append(scope=scope, session_id="s1", role=role, content=world.text(WORDS[::3]))
    by_name = {actor.name: actor for actor in world.actors}
    for index, tenant in enumerate(world.tenants):
        for owner, visibility, status in (
            ("agent-a", "owner", "published"),
            ("agent-b", "shared", "draft"),
            ("agent-b", "private", "draft"),
            ("user", "shared", "published"),
        ):
            Article.objects.create(
                tenant=tenant,
                title=world.text(WORDS[index : index + 2]),
                body=world.text(WORDS[2:6]),
                category="finding",
                status=status,
                visibility=visibility,
                owner_subject_id=by_name[f"{owner}@{index}"].subject_id,
            )


def _hash(raw_key: str) -> str:
    from loopmem.tenancy.principal import hash_key

    return hash_key(raw_key)


def _actor(
    name: str, row: ApiKey, raw_key: str, tenant: Tenant, index: int, subject: str, *, impersonate: bool = False
) -> Actor:
    client = APIClient()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {raw_key}"}
    if impersonate:
        headers["HTTP_X_IMPERSONATE_TENANT"] = str(tenant.id)
    client.credentials(**headers)
    return Actor(
        name=name,
        role=row.role,
        tenant_index=index,
        tenant_id=tenant.id,
        subject_id=subject,
        key_id=row.id,
        raw_key=raw_key,
        client=client,
        impersonating=impersonate,
    )


# --- What an actor may see -------------------------------------------------------------------------------------


def own_memories(actor: Actor) -> Any:
    """The actor's own subject's memories, by plain filter (not the service's scoping verb)."""
    return Memory.objects.filter(tenant_id=actor.tenant_id, subject_id=actor.subject_id)


def in_write_order(rows: Any) -> list[str]:
    """Row ids in the order they were written: the same steps pick the same rows (ids are random)."""
    return [str(i) for i in rows.order_by("inserted_at", "id").values_list("id", flat=True)]


def reachable_memories(actor: Actor) -> Any:
    rows = Memory.objects.filter(tenant_id=actor.tenant_id)
    return rows if actor.sees_whole_tenant_memories else rows.filter(subject_id=actor.subject_id)


def reachable_turns(actor: Actor) -> Any:
    return SessionTurn.objects.filter(tenant_id=actor.tenant_id, subject_id=actor.subject_id)


def visible_articles(actor: Actor) -> list[Article]:
    """docs/knowledge.md "Who sees what", written out again in Python over the tenant's rows."""
    rows = list(Article.objects.filter(tenant_id=actor.tenant_id))
    if actor.sees_whole_tenant_articles:
        return rows
    return [
        a
        for a in rows
        if (a.visibility == Article.Visibility.SHARED and a.status == Article.Status.PUBLISHED)
        or a.owner_subject_id == actor.subject_id
    ]


@dataclass
class Reach:
    """Every string an actor may be shown: the ids and tokens of the rows it can reach."""

    ids: set[str]
    tokens: set[str]
    article_ids: set[str]
    memory_ids: set[str]


def reach_of(actor: Actor, world: World) -> Reach:
    memories = list(reachable_memories(actor).values("id", "text", "metadata", "subject_id"))
    turns = list(reachable_turns(actor).values("id", "content", "metadata"))
    articles = visible_articles(actor)
    texts = [m["text"] for m in memories] + [t["content"] for t in turns]
    texts += [a.title + "\n" + a.body for a in articles]
    blob = json.dumps([m["metadata"] for m in memories] + [t["metadata"] for t in turns])
    blob += json.dumps([a.metadata for a in articles]) + "\n".join(texts)
    ids = {str(m["id"]) for m in memories} | {str(t["id"]) for t in turns} | {str(a.id) for a in articles}
    ids |= {str(p.id) for p in world.projects[actor.tenant_index]}
    ids |= {actor.subject_id, str(actor.key_id)}
    ids |= {m["subject_id"] for m in memories}  # a superadmin lists its tenant's subjects
    ids |= {a.owner_subject_id for a in articles}  # a shared article names its writer (a user key's id)
    # A graduated article names its memory in its title; a promoted memory's cross-links name articles.
    ids |= set(re.findall(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", blob))
    return Reach(
        ids=ids,
        tokens=set(TOKEN.findall(blob)),
        article_ids={str(a.id) for a in articles},
        memory_ids={str(m["id"]) for m in memories},
    )


def universe(world: World) -> set[str]:
    """Every id a response could leak: rows, projects, keys (a user key's id is its subject)."""
    ids: set[str] = set()
    for model in (Memory, SessionTurn, Article, Project):
        ids |= {str(i) for i in model.objects.values_list("id", flat=True)}
    ids |= {str(actor.key_id) for actor in world.actors}
    return ids


def leaks_in(body: str, actor: Actor, world: World, sent: str) -> list[str]:
    """Ids and tokens in a response that belong outside the actor's reach (and that it did not send itself)."""
    found = [i for i in universe(world) if i in body]
    tokens = set(TOKEN.findall(body))
    if not found and not tokens:
        return []
    reach = reach_of(actor, world)
    leaked = [i for i in found if i not in reach.ids and i not in sent]
    leaked += [t for t in tokens if t not in reach.tokens and not re.search(rf"\b{t}\b", sent)]
    return leaked


# --- What changed, and whose it was -----------------------------------------------------------------------------

Region = tuple[uuid.UUID, str]
Snapshot = dict[tuple[str, str], tuple[Region, Any]]


def snapshot(world: World) -> Snapshot:
    """Every row that belongs to someone, with the fields an action could change (the vector excepted: the
    embedding worker fills it in for everyone)."""
    rows: Snapshot = {}
    for m in Memory.objects.values_list(
        "id", "tenant_id", "subject_id", "project_id", "text", "tags", "metadata", "confidence", "superseded_by_id"
    ):
        rows[("memory", str(m[0]))] = ((m[1], m[2]), m[3:])
    for c in Memory.objects.values_list("id", "tenant_id", "subject_id", "recall_count", "graduated_at"):
        rows[("memory-counters", str(c[0]))] = ((c[1], c[2]), c[3:])
    for t in SessionTurn.objects.values_list("id", "tenant_id", "subject_id", "session_id", "content", "expires_at"):
        rows[("turn", str(t[0]))] = ((t[1], t[2]), t[3:])
    for a in Article.objects.values_list(
        "id", "tenant_id", "owner_subject_id", "title", "body", "status", "visibility", "tags", "project_id"
    ):
        rows[("article", str(a[0]))] = ((a[1], a[2]), a[3:])
    for j in PromotionJob.objects.values_list("id", "tenant_id", "subject_id", "session_id", "state", "attempts"):
        rows[("promotion-job", str(j[0]))] = ((j[1], j[2]), j[3:])
    ledger = Counter(
        (tenant_id, world.subject_of_key.get(key_id, str(key_id)))
        for tenant_id, key_id in ArticleAccessEvent.objects.values_list("tenant_id", "api_key_id")
    )
    for region, count in ledger.items():
        rows[("ledger", f"{region[0]}:{region[1]}")] = (region, count)
    return rows


def changes_outside(before: Snapshot, after: Snapshot, allowed: Iterable[Region]) -> list[str]:
    """Rows added, removed or changed whose owner is not in `allowed` (a region's subject may be ANY_SUBJECT)."""
    allowed = list(allowed)

    def inside(region: Region) -> bool:
        return any(region[0] == t and s in (ANY_SUBJECT, region[1]) for t, s in allowed)

    changed: list[str] = []
    for key in before.keys() | after.keys():
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        owner = (new or old)[0]  # type: ignore[index]  # one of them is set
        if not inside(owner):
            changed.append(f"{key[0]} {key[1]} of {owner}: {old and old[1]} -> {new and new[1]}")
    return changed
