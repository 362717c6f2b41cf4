"""Diversity selection (reference §4.7): containment, a refill floor, exact dedupe, near-duplicates, MMR.

Shared by merged recall (which reduces an over-fetched pool to `limit`) and knowledge search (which reorders its
pool). Similarity proposes, it does not dispose: a candidate without a vector is never dropped or demoted.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from django.conf import settings
from numpy.typing import NDArray

Vector = Sequence[float] | NDArray[np.floating[Any]]


@dataclass(frozen=True)
class DiversityConfig:
    """Every knob of the selector; defaults from settings, each overridable per call."""

    enabled: bool = True
    lambda_: float = 0.7
    near_dup_threshold: float = 0.95
    over_fetch: int = 3
    max_pool: int = 30

    @classmethod
    def from_settings(cls, **overrides: Any) -> DiversityConfig:
        """Deployment defaults, with per-call overrides validated as the reference does."""
        values: dict[str, Any] = {
            "enabled": settings.RECALL_DIVERSITY_ENABLED,
            "lambda_": settings.RECALL_DIVERSITY_LAMBDA,
            "near_dup_threshold": settings.RECALL_DIVERSITY_NEAR_DUP_THRESHOLD,
            "over_fetch": settings.RECALL_DIVERSITY_OVER_FETCH,
            "max_pool": settings.RECALL_DIVERSITY_MAX_POOL,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        default = cls()
        enabled = values["enabled"] if isinstance(values["enabled"], bool) else default.enabled
        lambda_ = values["lambda_"]
        lambda_ = min(float(lambda_), 1.0) if _number(lambda_) and lambda_ >= 0 else default.lambda_
        threshold = values["near_dup_threshold"]
        threshold = min(float(threshold), 2.0) if _number(threshold) and threshold > 0 else default.near_dup_threshold
        over_fetch = values["over_fetch"] if _positive_int(values["over_fetch"]) else default.over_fetch
        max_pool = values["max_pool"] if _positive_int(values["max_pool"]) else default.max_pool
        return cls(enabled, lambda_, threshold, over_fetch, max_pool)

    def pool_size(self, limit: int) -> int:
        """How many candidates to fetch for `limit` results: limit 10 → 30, 5 → 15, 50 → 50."""
        if not self.enabled:
            return limit
        return max(min(limit * self.over_fetch, self.max_pool), limit)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True)
class Candidate:
    """One rankable item: id, relevance score, content fingerprint, and vector (None when unavailable)."""

    id: str
    score: float
    content_hash: str | None = None
    vector: Vector | None = None


@dataclass
class DiversityStats:
    enabled: bool
    lambda_: float
    near_dup_threshold: float
    candidates: int = 0
    selected: int = 0
    dropped_already_seen: int = 0
    readmitted_already_seen: int = 0
    dropped_exact_duplicates: int = 0
    dropped_near_duplicates: int = 0
    vectors_available: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def as_meta(self) -> dict[str, Any]:
        data = asdict(self)
        data["lambda"] = data.pop("lambda_")
        data.update(data.pop("extra"))
        return data


def select(
    candidates: Sequence[Candidate],
    limit: int,
    config: DiversityConfig,
    *,
    exclude_ids: Collection[str] = (),
    pinned: Sequence[Candidate] = (),
) -> tuple[list[Candidate], DiversityStats]:
    """Choose up to `limit` candidates (given in relevance order); returns them in selection order and stats."""
    stats = DiversityStats(
        enabled=config.enabled and limit > 0,
        lambda_=config.lambda_,
        near_dup_threshold=config.near_dup_threshold,
        candidates=len(candidates) + len(pinned),
        vectors_available=sum(1 for c in [*pinned, *candidates] if c.vector is not None),
    )
    if limit <= 0:
        stats.enabled = False
        return [], stats
    if not config.enabled:
        chosen = [*pinned, *candidates][:limit]
        stats.selected = len(chosen)
        return chosen, stats

    pinned_ids = {c.id for c in pinned}
    rest = [c for c in candidates if c.id not in pinned_ids]
    # 1. Containment with a floor: what was already shown is dropped unless it is needed to fill the slots.
    unseen = [c for c in rest if c.id not in exclude_ids]
    seen = [c for c in rest if c.id in exclude_ids]
    shortfall = max(limit - len(pinned) - len(unseen), 0)
    readmitted = seen[:shortfall]
    stats.readmitted_already_seen = len(readmitted)
    stats.dropped_already_seen = len(seen) - len(readmitted)
    readmitted_ids = {c.id for c in readmitted}
    pool = [c for c in rest if c.id not in exclude_ids or c.id in readmitted_ids]

    # 2. Exact dedupe by content fingerprint (the first, highest-ranked, wins; no hash is no fingerprint).
    fingerprints = {c.content_hash for c in pinned if c.content_hash}
    unique: list[Candidate] = []
    for candidate in pool:
        if candidate.content_hash and candidate.content_hash in fingerprints:
            stats.dropped_exact_duplicates += 1
            continue
        if candidate.content_hash:
            fingerprints.add(candidate.content_hash)
        unique.append(candidate)

    # 3 + 4. Near-duplicates against the selected set, then greedy MMR, over one cosine matrix computed up front.
    everyone = [*pinned, *unique]
    sims = _cosine_matrix(everyone)
    first = len(pinned)
    selected = list(pinned)
    max_sim = [float(sims[first + i, :first].max()) if first else 0.0 for i in range(len(unique))]
    remaining = list(range(len(unique)))
    while remaining and len(selected) < limit:
        kept = []
        for index in remaining:
            if max_sim[index] > 0.0 and max_sim[index] >= config.near_dup_threshold:
                stats.dropped_near_duplicates += 1
            else:
                kept.append(index)
        remaining = kept
        if not remaining:
            break
        winner = max(
            remaining,
            key=lambda i: (config.lambda_ * unique[i].score - (1 - config.lambda_) * max_sim[i], -i),
        )
        remaining.remove(winner)
        selected.append(unique[winner])
        for index in remaining:
            max_sim[index] = max(max_sim[index], float(sims[first + index, first + winner]))
    stats.selected = len(selected)
    return selected, stats


def _cosine_matrix(candidates: Sequence[Candidate]) -> NDArray[np.float64]:
    """Pairwise cosines; 0.0 wherever a vector is missing, zero, or of another length than the others."""
    size = len(candidates)
    sims = np.zeros((size, size), dtype=np.float64)
    present = [i for i, c in enumerate(candidates) if c.vector is not None and len(c.vector) > 0]
    if not present:
        return sims
    widths = {len(candidates[i].vector) for i in present}  # type: ignore[arg-type]  # None filtered above
    if len(widths) > 1:
        for i in present:
            for j in present:
                sims[i, j] = cosine(candidates[i].vector, candidates[j].vector)
        return sims
    matrix = np.asarray([candidates[i].vector for i in present], dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1)
    matrix[norms > 0] /= norms[norms > 0, None]
    sims[np.ix_(present, present)] = matrix @ matrix.T
    return sims


def cosine(a: Vector | None, b: Vector | None) -> float:
    """dot / (|a| |b|); 0.0 when either is missing, the lengths differ, or a norm is zero."""
    if a is None or b is None or len(a) != len(b):
        return 0.0
    left, right = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    norm = float(np.linalg.norm(left) * np.linalg.norm(right))
    return float(left @ right) / norm if norm else 0.0
