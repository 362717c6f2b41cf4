"""Promotion-quality eval (reference §4.16): compiler precision/recall on a labelled dataset; never a gate."""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from django.utils import timezone

from loopmem import llm
from loopmem.models import Tenant
from loopmem.scope import Scope
from memory.models import PromotionEvalSnapshot, SessionTurn
from memory.promotion.compilers import EVAL_SUBJECT_ID, CompileFailed, compiler_for, gate, load_turns
from memory.promotion.events import emit
from memory.services import session_append

logger = logging.getLogger(__name__)

MATCH_THRESHOLD = 0.5
DATASETS = Path(__file__).parent / "datasets"
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)  # letters and digits: the reference's [^\p{L}\p{N}]+ split


@dataclass
class SessionScore:
    id: str
    tp: int
    fp: int
    fn: int


@dataclass
class EvalResult:
    dataset_version: str
    compiler: str
    day: date
    sessions: list[SessionScore] = field(default_factory=list)

    @property
    def true_positives(self) -> int:
        return sum(s.tp for s in self.sessions)

    @property
    def false_positives(self) -> int:
        return sum(s.fp for s in self.sessions)

    @property
    def false_negatives(self) -> int:
        return sum(s.fn for s in self.sessions)

    @property
    def precision(self) -> float | None:
        emitted = self.true_positives + self.false_positives
        return self.true_positives / emitted if emitted else None

    @property
    def recall(self) -> float | None:
        expected = self.true_positives + self.false_negatives
        return self.true_positives / expected if expected else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "dataset_version": self.dataset_version,
            "compiler": self.compiler,
            "day": self.day.isoformat(),
            "session_count": len(self.sessions),
            "true_positives": self.true_positives,
            "false_positives": self.false_positives,
            "false_negatives": self.false_negatives,
            "precision": self.precision,
            "recall": self.recall,
            "sessions": [{"id": s.id, "tp": s.tp, "fp": s.fp, "fn": s.fn} for s in self.sessions],
        }


def load_dataset(version: str = "v1") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATASETS / f"dataset_{version}.json").read_text())
    return data


def dice(a: str, b: str) -> float:
    """Sørensen-Dice over token sets; 0.0 when both are empty."""
    left, right = set(_TOKEN.findall(a.lower())), set(_TOKEN.findall(b.lower()))
    if not left and not right:
        return 0.0
    return 2 * len(left & right) / (len(left) + len(right))


def score(emitted: list[str], expected: list[str]) -> tuple[int, int, int]:
    """Greedy: each emitted fact, in order, claims the best unclaimed expected fact at ≥ the threshold."""
    unclaimed = list(expected)
    tp = 0
    for fact in emitted:
        best = max(unclaimed, key=lambda e: dice(fact, e), default=None)
        if best is not None and dice(fact, best) >= MATCH_THRESHOLD:
            unclaimed.remove(best)
            tp += 1
    return tp, len(emitted) - tp, len(unclaimed)


def promotion_eval(*, tenant: Tenant, compiler_name: str = "tenant", dataset_version: str = "v1") -> EvalResult:
    """Compile each labelled session under the reserved eval subject, score it, store the day's snapshot.

    The seeded turns are always deleted, whatever happens; the eval subject can never be promoted.
    """
    dataset = load_dataset(dataset_version)
    compiler = compiler_for(tenant, name=compiler_name)
    scope = Scope(tenant_id=tenant.id, subject_id=EVAL_SUBJECT_ID)
    result = EvalResult(dataset_version=dataset["version"], compiler=compiler.name, day=timezone.now().date())
    for session in dataset["sessions"]:
        session_id = f"promeval-{uuid.uuid4().int}"
        try:
            for turn in session["turns"]:
                session_append(
                    scope=scope,
                    session_id=session_id,
                    role=SessionTurn.Role.USER,
                    content=turn,
                    expires_at=timezone.now() + timedelta(hours=1),
                )
            try:
                emitted = [c.text for c in gate(compiler.compile(load_turns(scope=scope, session_id=session_id)))]
            except CompileFailed as failure:
                logger.warning("eval session %s failed to compile: %s", session["id"], failure.reason)
                emitted = []
        finally:
            SessionTurn.objects.filter(tenant_id=tenant.id, subject_id=EVAL_SUBJECT_ID, session_id=session_id).delete()
        tp, fp, fn = score(emitted, session["expected_facts"])
        result.sessions.append(SessionScore(id=session["id"], tp=tp, fp=fp, fn=fn))
    _store(tenant, result)
    emit(
        "eval",
        tenant_id=tenant.id,
        dataset_version=result.dataset_version,
        compiler=result.compiler,
        precision=result.precision,
        recall=result.recall,
        tp=result.true_positives,
        fp=result.false_positives,
        fn=result.false_negatives,
        session_count=len(result.sessions),
    )
    return result


def promotion_eval_tenants_with_llm() -> int:
    """The daily eval: every tenant whose own LLM can be called is scored; returns how many were."""
    scored = 0
    for tenant in Tenant.objects.all():
        spec = llm.llm_spec_for(tenant)
        if spec.provider == "extractive" or not spec.api_key:
            continue  # nothing to calibrate without a usable LLM
        promotion_eval(tenant=tenant)
        scored += 1
    return scored


def _store(tenant: Tenant, result: EvalResult) -> None:
    PromotionEvalSnapshot.objects.update_or_create(
        tenant=tenant,
        dataset_version=result.dataset_version,
        compiler=result.compiler,
        day=result.day,
        defaults={
            "session_count": len(result.sessions),
            "true_positives": result.true_positives,
            "false_positives": result.false_positives,
            "false_negatives": result.false_negatives,
            "precision": result.precision,
            "recall": result.recall,
            "computed_at": timezone.now(),
        },
    )
