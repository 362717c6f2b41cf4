"""Import: memories read from a file (an export, or any NDJSON / JSON array of lines) written into a subject, with
their supersede chains rebuilt, idempotent on each row's chain key.

A row's chain key is its text hash plus its predecessors' keys: importing a file twice adds nothing, and a row the
subject already holds (by key, or by text and chain for rows written otherwise) is skipped. Rows are written through
the one writer (memory.writer) a chain at a time, in chunks of transactions under the subject's quota lock.
Over the API an import the quota stopped is refused, saying what it wrote (`memory_import_within_quota`).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models.expressions import RawSQL
from django.utils import timezone

from loopmem.errors import QuotaExceeded, SecretDetected
from loopmem.tenancy.scope import Scope
from memory.models import Memory
from memory.writer import MemoryDraft, SubjectWriter, screen
from projects.selectors import project_in_tenant

IMPORT_WRITE_CHUNK = 500


@dataclass(frozen=True)
class ImportRow:
    """One memory to import, already validated. `origin_id` / `superseded_by` / `supersedes` are the ids the
    file uses (an export's own ids), only to rebuild the chains; they are never stored."""

    text: str
    confidence: float = 1.0
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    source_session_id: str | None = None
    project_id: uuid.UUID | None = None
    origin_id: uuid.UUID | None = None
    superseded_by: uuid.UUID | None = None
    supersedes: uuid.UUID | None = None
    line: int | None = None  # where the file has it (1-based; an array's item number), for the report
    said_on: date | None = None  # the day the export says it was written: its relative dates count from it

    def draft(self) -> MemoryDraft:
        """The row as the writer takes it, in the global bucket and with no chain key (the import sets both)."""
        return MemoryDraft(
            text=self.text,
            confidence=self.confidence,
            tags=self.tags,
            metadata=self.metadata,
            source=Memory.Source.IMPORTED,
            source_session_id=self.source_session_id,
            said_on=self.said_on,
        )


@dataclass
class ImportReport:
    lines: int = 0
    created: int = 0
    skipped: int = 0
    linked: int = 0
    stopped_at: int | None = None  # the 1-based line the quota stopped the import at

    def as_dict(self) -> dict[str, int]:
        return {"lines": self.lines, "created": self.created, "skipped": self.skipped, "linked": self.linked}


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def chain_key(text_sha: str, predecessor_keys: Iterable[str]) -> str:
    """A row's import identity: its text hash plus its predecessors' keys (a root's is its text hash alone)."""
    return hashlib.sha256(f"{text_sha}|{','.join(sorted(predecessor_keys))}".encode()).hexdigest()


def _chain_keys(texts: Mapping[Any, str], successor_of: Mapping[Any, Any]) -> dict[Any, str]:
    """The chain key of each row, predecessors first (`texts`: row → text sha; `successor_of`: row → row)."""
    predecessors: dict[Any, list[Any]] = {row: [] for row in texts}
    for row, successor in successor_of.items():
        if successor in predecessors and row in texts:
            predecessors[successor].append(row)
    keys: dict[Any, str] = {}
    pending = [row for row in texts if not predecessors[row]]
    while pending:
        row = pending.pop()
        keys[row] = chain_key(texts[row], (keys[p] for p in predecessors[row]))
        successor = successor_of.get(row)
        if successor in predecessors and successor not in keys and all(p in keys for p in predecessors[successor]):
            pending.append(successor)
    for row in texts:  # a cycle (never written by this service) keys its rows by text alone
        keys.setdefault(row, chain_key(texts[row], ()))
    return keys


def _existing_keys(scope: Scope) -> dict[str, uuid.UUID]:
    """chain key → row id of every row the subject holds (text hashed in the database)."""
    rows = (
        Memory.objects.for_scope(scope)
        .annotate(text_sha=RawSQL("encode(sha256(convert_to(memories.text, 'UTF8')), 'hex')", ()))
        .values_list("id", "superseded_by_id", "import_key", "text_sha")
    )
    texts: dict[uuid.UUID, str] = {}
    successor_of: dict[uuid.UUID, uuid.UUID] = {}
    stored: dict[str, uuid.UUID] = {}
    for row_id, successor, key, text_sha in rows.iterator(chunk_size=2000):
        texts[row_id] = text_sha
        if successor is not None:
            successor_of[row_id] = successor
        if key:
            stored[key] = row_id
    return {**stored, **{key: row_id for row_id, key in _chain_keys(texts, successor_of).items()}}


def memory_import(
    *, scope: Scope, rows: Sequence[ImportRow], progress: Callable[[int], object] | None = None
) -> ImportReport:
    """Write `rows` into the subject (source `imported`), rebuilding their supersede chains; skip what it holds.

    Idempotent: a row whose chain key the subject already holds is skipped (the partial unique index on
    (tenant, subject, import_key) backs this up), so importing a file twice adds nothing. Rows are written a
    chain at a time, in file order, in chunks of transactions under the subject's lock; the quota counts the
    rows left live. When it is reached the import stops there: what was written stays, and the report says
    where (`stopped_at`).
    """
    rows = _screened(scope, rows)
    report = ImportReport(lines=len(rows))
    index_of: dict[uuid.UUID | None, int] = {row.origin_id: i for i, row in enumerate(rows) if row.origin_id}
    successor = _successors(rows, index_of)
    keys = _chain_keys({i: text_hash(row.text) for i, row in enumerate(rows)}, successor)
    chains = _chains(len(rows), successor)
    projects = _known_projects(scope, {row.project_id for row in rows if row.project_id is not None})
    at = 0
    while at < len(chains):
        with transaction.atomic():
            writer = SubjectWriter(scope)
            existing = _existing_keys(scope)
            batch = 0
            while at < len(chains) and batch < IMPORT_WRITE_CHUNK:
                chain = chains[at]
                plan = [i for i in chain if keys[i] not in existing]
                ids = {i: existing[keys[i]] for i in chain if keys[i] in existing}
                links = _links(chain, successor, ids, plan)
                live_delta = sum(1 for i in plan if i not in successor) - _heads_superseded(scope, links, ids)
                if plan and not writer.has_room(live_delta):
                    first = min(plan)
                    report.stopped_at = rows[first].line or first + 1
                    return report
                for i in plan:
                    draft = replace(rows[i].draft(), project_id=projects.get(rows[i].project_id), import_key=keys[i])
                    memory = writer.insert(draft)
                    ids[i] = memory.id
                    existing[keys[i]] = memory.id
                report.linked += _link(scope, chain, successor, ids, plan)
                report.created += len(plan)
                report.skipped += len(chain) - len(plan)
                writer.charge(live_delta)
                batch += len(chain)
                at += 1
                if progress is not None:
                    progress(len(chain))
    return report


def _screened(scope: Scope, rows: Sequence[ImportRow]) -> list[ImportRow]:
    """Every line passes the tenant's secret policy before anything is written: a refusal names its line."""
    cleaned = []
    for row in rows:
        try:
            clean = screen(scope.tenant_id, row.draft())
        except SecretDetected as refused:
            raise SecretDetected(details={"line": row.line, **refused.details}) from None
        cleaned.append(replace(row, text=clean.text, tags=clean.tags, metadata=clean.metadata))
    return cleaned


def _successors(rows: Sequence[ImportRow], index_of: Mapping[uuid.UUID | None, int]) -> dict[int, int]:
    """line → the line that supersedes it, from `superseded_by` (authoritative) or `supersedes`; no cycles."""
    wanted: dict[int, int] = {}
    for i, row in enumerate(rows):
        if row.supersedes in index_of:
            wanted.setdefault(index_of[row.supersedes], i)
    for i, row in enumerate(rows):
        if row.superseded_by in index_of:
            wanted[i] = index_of[row.superseded_by]
    successor: dict[int, int] = {}
    for i, j in sorted(wanted.items()):
        k: int | None = j
        while k is not None and k != i:  # following j's successors must never lead back to i
            k = successor.get(k)
        if k is None:
            successor[i] = j
    return successor


def _chains(count: int, successor: Mapping[int, int]) -> list[list[int]]:
    """Rows grouped into chains (connected by supersede links), each in file order, chains by first line."""
    parent = list(range(count))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in successor.items():
        parent[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for i in range(count):
        groups.setdefault(root(i), []).append(i)
    return sorted(groups.values(), key=lambda chain: chain[0])


def _links(chain: list[int], successor: Mapping[int, int], ids: Mapping[int, uuid.UUID], plan: list[int]) -> list[int]:
    """The rows of `chain` already stored whose successor is about to be written."""
    planned = set(plan)
    return [i for i in chain if i in ids and successor.get(i) in planned]


def _heads_superseded(scope: Scope, links: list[int], ids: Mapping[int, uuid.UUID]) -> int:
    """How many stored, live rows a chain's new rows will supersede (each frees a quota slot)."""
    if not links:
        return 0
    return Memory.objects.for_scope(scope).live().filter(id__in=[ids[i] for i in links]).count()


def _link(
    scope: Scope, chain: list[int], successor: Mapping[int, int], ids: Mapping[int, uuid.UUID], plan: list[int]
) -> int:
    """Point each row of the chain at its successor written now, unless it is already superseded (by anything).

    Only links towards a new row are made: a new row has no successor yet, so no link can close a cycle."""
    planned = set(plan)
    linked = 0
    for i in chain:
        j = successor.get(i)
        if j is None or j not in planned or i not in ids:
            continue
        linked += (
            Memory.objects.for_scope(scope)
            .filter(id=ids[i], superseded_by__isnull=True)
            .update(superseded_by=ids[j], updated_at=timezone.now())
        )
    return linked


def _known_projects(scope: Scope, project_ids: set[uuid.UUID]) -> dict[uuid.UUID | None, uuid.UUID | None]:
    """The file's project ids that are projects of this tenant (others import as global)."""
    known = {pid for pid in project_ids if project_in_tenant(tenant_id=scope.tenant_id, project_id=pid) is not None}
    return {pid: pid for pid in known}


def memory_import_within_quota(*, scope: Scope, rows: Sequence[ImportRow]) -> ImportReport:
    """Import `rows` into the subject; raises QuotaExceeded (with the report) if the quota stopped the import."""
    report = memory_import(scope=scope, rows=rows)
    if report.stopped_at is None:
        return report
    raise QuotaExceeded(
        f"The per-subject long-term memory quota was reached at line {report.stopped_at}: the import "
        f"stopped there after writing {report.created} memories (and skipping {report.skipped} already "
        "held). Forget memories, then import the same file again: what was written is skipped.",
        details={
            **report.as_dict(),
            "written": report.created,
            "stopped_at_line": report.stopped_at,
            "quota": settings.MEMORY_QUOTA,
        },
    )
