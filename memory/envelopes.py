"""Memory's response envelopes (reference §2.1 to §2.5, and a promotion's job), typed; merged recall reuses the
recall envelope."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any, NotRequired, TypedDict

from django.utils import timezone
from rest_framework.utils.encoders import JSONEncoder

from loopmem.http.outcome import outcome_for
from memory.models import Memory, PromotionJob
from memory.selectors import RecallHit, RecallResult
from memory.serializers import PromotionJobOut


def memory_data(memory: Memory) -> dict[str, Any]:
    """The memory object of every answer (reference memory_data; never the embedding): what `MemoryOut`, the
    schema's serializer, renders, built directly. A DRF serializer cost ~0.1 ms a row on the recall path (its
    fields are deep-copied per call); tests/memory/test_memory_data.py holds the two equal."""
    project_id, superseded_by, session_id = memory.project_id, memory.superseded_by_id, memory.source_session_id
    return {
        "id": str(memory.id),
        "tier": "long_term",
        "tenant_id": str(memory.tenant_id),
        "subject_id": memory.subject_id,
        "project_id": str(project_id) if project_id is not None else None,
        "text": memory.text,
        "confidence": float(memory.confidence),
        "source": memory.source,
        "source_session_id": session_id,
        "tags": list(memory.tags),
        "metadata": memory.metadata,
        "superseded_by": str(superseded_by) if superseded_by is not None else None,
        "inserted_at": _iso(memory.inserted_at),
        "updated_at": _iso(memory.updated_at),
    }


def _iso(moment: datetime | None) -> str | None:
    # DRF's DateTimeField: in the current time zone, ISO 8601, UTC written as Z.
    if moment is None:
        return None
    text = timezone.localtime(moment).isoformat() if timezone.is_aware(moment) else moment.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


class LaneScoresData(TypedDict):
    semantic: float | None
    keyword: float | None
    time: NotRequired[float]  # only when the query names days
    hop: NotRequired[float]  # deep mode only


class RecallHitData(TypedDict):
    memory: dict[str, Any]
    score: float | None
    scores: NotRequired[LaneScoresData]  # keyword, hybrid and deep modes only


class RecallEnvelope(TypedDict):
    data: list[RecallHitData]
    meta: dict[str, Any]


def recall(result: RecallResult) -> RecallEnvelope:
    """{data: [{memory, score}], meta} (reference §2.2); ann_iterative_scan only when the ANN index ran.

    The semantic mode answers exactly the reference's envelope. Keyword, hybrid and deep add each hit's lane
    `scores` and `meta.mode`, `lane_counts`, `answer_confidence` (the separation grade: memory.separation_grade)
    and, when a lane could not run, `lane_lost`; a hybrid or deep query that names days adds `meta.asked_days` and
    each hit's `time`; deep adds each hit's `hop`.
    """
    memories = [memory_data(hit.memory) for hit in result.hits]
    lanes = result.mode != "semantic"
    data: list[RecallHitData] = [
        _hit(memory, hit, with_lanes=lanes) for memory, hit in zip(memories, result.hits, strict=True)
    ]
    meta: dict[str, Any] = {
        "total_count": len(data),
        "fallback": result.fallback,
        "reason": result.reason,
        "underfilled": result.underfilled,
    }
    if result.recall_path is not None:
        meta["recall_path"] = result.recall_path
    if result.ann_iterative_scan is not None:
        meta["ann_iterative_scan"] = result.ann_iterative_scan
        if result.ann_iterative_scan_reason:
            meta["ann_iterative_scan_reason"] = result.ann_iterative_scan_reason
    if lanes:
        meta["mode"] = result.mode
        meta["lane_counts"] = result.lane_counts
        meta["answer_confidence"] = result.separation_grade
        if result.lane_lost is not None:
            meta["lane_lost"] = result.lane_lost
        if result.asked_days:
            meta["asked_days"] = [
                {"start": start.isoformat(), "end": end.isoformat()} for start, end in result.asked_days
            ]
    meta["outcome"] = outcome_for(meta, count=len(data))
    return {"data": data, "meta": meta}


# --- Export ---------------------------------------------------------------------------------------------------

EXPORT_CONTENT_TYPE = "application/x-ndjson"


def export_lines(rows: Iterable[Memory], *, chunk: int = 500) -> Iterator[str]:
    """NDJSON, one memory per line: the memory object plus `supersedes` (the id it corrected); never the embedding.

    Rendered a chunk at a time.
    """
    pending: list[Memory] = []
    for memory in rows:
        pending.append(memory)
        if len(pending) >= chunk:
            yield from _render(pending)
            pending = []
    if pending:
        yield from _render(pending)


def _render(memories: list[Memory]) -> Iterator[str]:
    for memory in memories:
        data = memory_data(memory)
        supersedes = getattr(memory, "supersedes_id", None)
        line = {**data, "supersedes": str(supersedes) if supersedes is not None else None}
        yield json.dumps(line, cls=JSONEncoder, ensure_ascii=False) + "\n"


class PromotionJobEnvelope(TypedDict):
    data: dict[str, Any]


def promotion_job(job: PromotionJob) -> PromotionJobEnvelope:
    """{data: job}: the caller's last promotion of a session, its status, counts and written memory ids."""
    return {"data": PromotionJobOut(job).data}


def _hit(memory: dict[str, Any], hit: RecallHit, *, with_lanes: bool) -> RecallHitData:
    if not with_lanes:
        return {"memory": memory, "score": hit.score}
    scores: LaneScoresData = {"semantic": hit.semantic, "keyword": hit.keyword}
    if hit.time is not None:
        scores["time"] = hit.time
    if hit.hop is not None:
        scores["hop"] = hit.hop
    return {"memory": memory, "score": hit.score, "scores": scores}
