"""The memory recall evaluation: the team's conversational dataset, loaded into a scratch tenant, asked in each mode.

A quality measurement, not a latency one: its figures depend on the dataset, the embedder and the ranking, never on
the machine's load. Each conversation becomes one subject; each turn one memory, written `[<session date>]
<Speaker>: <text>` with the session as its `source_session_id`, in the order it was said. Memories are embedded with
the local MiniLM embedder through the embedding pipeline (as the worker would); each question is embedded once and
asked in every mode through the same reads the API runs (`memory.selectors.recall_by_vector` for semantic,
`memory.recall_modes.recall_lanes` for keyword and hybrid).

Scores: evidence recall@k (at least one evidence turn in the top k) and all-evidence-hit@k (every evidence turn in
the top k), per question kind and over all answerable questions; and, on the results at the default limit, the
`answer_confidence` each mode gives to answerable questions (top hit right or wrong) and to the no-answer ones.

Every question carries a `split`, dev or test: tune on dev, report on test. A split selects the questions asked; the
whole of every conversation is loaded either way, so a question ranks among the same memories in every split.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings

from loopmem.embedding import embedders
from loopmem.embedding.embedders import QueryEmbedding
from loopmem.embedding.pipeline import backfill
from loopmem.models import Tenant
from loopmem.tenancy.scope import Scope
from loopmem.tenancy.services import tenant_create, tenant_set_provider
from memory.embedding import MEMORY_EMBEDDINGS
from memory.event_time import event_spans
from memory.models import Memory
from memory.recall_modes import RECALL_MODES, RecallMode, recall_lanes
from memory.selectors import RecallResult, recall_by_vector
from memory.separation_grade import separation_grade

DATASET = Path(settings.BASE_DIR) / "memory" / "recall_eval" / "dataset_v1.json"
NO_ANSWER = "no_answer"
CONFIDENCE_LEVELS = ("high", "medium", "low", "none")
DEFAULT_LIMIT = 10  # the API's default: the confusion table reads the results an agent gets by default
EVAL_EMBEDDER = "local"
SPLITS = ("dev", "test")
ALL_SPLITS = "all"


@dataclass(frozen=True)
class Question:
    id: str
    subject: str
    kind: str
    text: str
    evidence: frozenset[str]
    split: str | None = None


@dataclass
class Corpus:
    """What was loaded: the scratch tenant, the turn id of every memory, and the questions."""

    tenant: Tenant
    turn_of: dict[uuid.UUID, str]
    questions: list[Question]


@dataclass
class ModeScores:
    """Per kind and k: how many answerable questions had any / all of their evidence in the top k."""

    any_hit: dict[tuple[str, int], int] = field(default_factory=Counter)
    all_hit: dict[tuple[str, int], int] = field(default_factory=Counter)
    # (answerable_top_right | answerable_top_wrong | no_answer, level) -> questions
    confidence: dict[tuple[str, str], int] = field(default_factory=Counter)


Progress = Callable[[int], object]


def load_dataset(path: Path = DATASET) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def memory_text(session_date: str, speaker: str, text: str) -> str:
    return f"[{session_date}] {speaker}: {text}"


@contextlib.contextmanager
def scratch_tenant() -> Iterator[Tenant]:
    """A tenant of its own that embeds with the local MiniLM embedder, deleted (memories and all) afterwards."""
    slug = f"recall-eval-{uuid.uuid4().hex[:12]}"
    tenant = tenant_create(name=f"recall_eval scratch {slug}", slug=slug)
    try:
        # The test settings default to the hashing embedder: the evaluation always measures the local one.
        yield tenant_set_provider(tenant=tenant, embedding=EVAL_EMBEDDER, embedding_model="")
    finally:
        tenant.delete()  # its memories cascade


def evaluation_id(turn_id: str) -> uuid.UUID:
    """A memory id whose order is fixed by the turn id, so ties (which rank by id) break the same way every run.

    The high half comes from the turn id, the low half is random: two runs sharing a database never collide.
    """
    fixed = uuid.uuid5(uuid.NAMESPACE_URL, f"loopmem:recall_eval:{turn_id}").int >> 64
    return uuid.UUID(int=(fixed << 64) | secrets.randbits(64))


def parse_split(value: str) -> str:
    if value != ALL_SPLITS and value not in SPLITS:
        raise ValueError(f"unknown split {value!r}: use {', '.join(SPLITS)} or {ALL_SPLITS}")
    return value


def select_questions(dataset: dict[str, Any], split: str = ALL_SPLITS) -> list[Question]:
    """The dataset's questions in `split` (every one for "all"), in dataset order.

    A split label other than dev or test is refused, and so is choosing a split on a dataset whose questions lack one.
    """
    selected: list[Question] = []
    for conversation in dataset["conversations"]:
        for q in conversation["questions"]:
            label = q.get("split")
            if label is not None and label not in SPLITS:
                raise ValueError(f"question {q['id']} has split {label!r}: use {' or '.join(SPLITS)}")
            if split != ALL_SPLITS and label is None:
                raise ValueError(f"question {q['id']} has no split: --split {split} needs one on every question")
            if split in (ALL_SPLITS, label):
                selected.append(
                    Question(q["id"], conversation["id"], q["kind"], q["question"], frozenset(q["evidence"]), label)
                )
    return selected


def load_corpus(
    dataset: dict[str, Any], *, tenant: Tenant, split: str = ALL_SPLITS, progress: Progress | None = None
) -> Corpus:
    """Every conversation as one subject of `tenant`, one memory per turn, embedded as the worker would.

    Every turn is loaded whatever the split: the split selects the questions, not the memories they rank among.
    """
    questions = select_questions(dataset, split)
    turn_of: dict[uuid.UUID, str] = {}
    for conversation in dataset["conversations"]:
        rows: list[Memory] = []
        written_at: list[datetime] = []
        for session in conversation["sessions"]:
            day = datetime.combine(date.fromisoformat(session["date"]), time(9), tzinfo=UTC)
            for n, turn in enumerate(session["turns"]):
                memory = Memory(
                    id=evaluation_id(turn["id"]),
                    tenant=tenant,
                    subject_id=conversation["id"],
                    text=memory_text(session["date"], turn["speaker"], turn["text"]),
                    source_session_id=session["id"],
                    metadata={"turn_id": turn["id"]},
                )
                # As the writer resolves a memory's days, against the day it was said (the session's).
                memory.occurred_on = event_spans(memory.text, day.date()) or None
                rows.append(memory)
                written_at.append(day + timedelta(minutes=n))
                turn_of[memory.id] = turn["id"]
        Memory.objects.bulk_create(rows)
        # auto_now_add stamped them all "now": restore the order (and the day) they were said in.
        for memory, when in zip(rows, written_at, strict=True):
            memory.inserted_at = when
        Memory.objects.bulk_update(rows, ["inserted_at"])
    report = backfill(MEMORY_EMBEDDINGS, tenant=tenant, limit=len(turn_of), on_batch=progress)
    if report.embedded != len(turn_of):
        raise RuntimeError(f"embedding the corpus failed: {report.as_dict()}")
    return Corpus(tenant=tenant, turn_of=turn_of, questions=questions)


def embed_questions(tenant: Tenant, questions: Sequence[Question]) -> list[QueryEmbedding]:
    vectors, model_id = embedders.embed_texts(tenant, [q.text for q in questions])
    return [QueryEmbedding(vector=vector, model_id=model_id) for vector in vectors]


def ask(mode: RecallMode, scope: Scope, question: Question, embedding: QueryEmbedding, k: int) -> RecallResult:
    """One question, read the way the API reads `mode` (the question embedded once for every mode and k)."""
    if mode == "semantic":
        return recall_by_vector(scope=scope, vector=embedding.vector, model_id=embedding.model_id, k=k)
    return recall_lanes(scope=scope, query=question.text, k=k, include_superseded=False, mode=mode, embedding=embedding)


def confidence_of(mode: RecallMode, result: RecallResult) -> str:
    """The verdict the API gives (keyword, hybrid); for semantic, the same rule over its scores."""
    if result.separation_grade is not None:
        return result.separation_grade
    return separation_grade([hit.score for hit in result.hits if hit.score is not None])


def evaluate(
    corpus: Corpus, *, modes: Sequence[RecallMode], ks: Sequence[int], progress: Progress | None = None
) -> dict[RecallMode, ModeScores]:
    """Ask every question in every mode at every k."""
    vectors = embed_questions(corpus.tenant, corpus.questions)
    confidence_k = DEFAULT_LIMIT if DEFAULT_LIMIT in ks else max(ks)
    scores: dict[RecallMode, ModeScores] = {mode: ModeScores() for mode in modes}
    for question, embedding in zip(corpus.questions, vectors, strict=True):
        scope = Scope(tenant_id=corpus.tenant.id, subject_id=question.subject)
        for mode in modes:
            for k in ks:
                result = ask(mode, scope, question, embedding, k)
                found = [corpus.turn_of[hit.memory.id] for hit in result.hits]
                score_hits(scores[mode], question, found, k)
                if k == confidence_k:
                    _note_confidence(scores[mode], question, found, confidence_of(mode, result))
        if progress is not None:
            progress(1)
    return scores


def score_hits(scores: ModeScores, question: Question, found: Sequence[str], k: int) -> None:
    """Count one answerable question at `k`, given the turn ids a mode returned, best first.

    Evidence recall: at least one of its evidence turns is in the top k. All-evidence-hit: every one of them is
    (for a single-evidence question the two agree). No-answer questions have no evidence and are not counted.
    """
    if question.kind == NO_ANSWER:
        return
    top = set(found[:k])
    scores.any_hit[(question.kind, k)] += bool(top & question.evidence)
    scores.all_hit[(question.kind, k)] += question.evidence <= top


def _note_confidence(scores: ModeScores, question: Question, found: list[str], level: str) -> None:
    if question.kind == NO_ANSWER:
        row = NO_ANSWER
    else:
        row = "answerable_top_right" if found and found[0] in question.evidence else "answerable_top_wrong"
    scores.confidence[(row, level)] += 1


def summary(
    corpus: Corpus,
    scores: dict[RecallMode, ModeScores],
    *,
    ks: Sequence[int],
    dataset_version: str,
    split: str = ALL_SPLITS,
) -> dict[str, Any]:
    """The figures as one JSON object: per mode, per kind and overall, at each k; and the confusion tables.

    Each cell holds `recall` (evidence recall@k) and `all_evidence` (all-evidence-hit@k), as shares of the kind's
    questions (overall: of the answerable ones) in the split.
    """
    asked = Counter(q.kind for q in corpus.questions)
    kinds = sorted(kind for kind in asked if kind != NO_ANSWER)
    answerable = sum(asked[kind] for kind in kinds)
    out: dict[str, Any] = {
        "dataset_version": dataset_version,
        "split": split,
        "embedder": corpus.tenant.embedding_provider,
        "conversations": len({q.subject for q in corpus.questions}),
        "memories": len(corpus.turn_of),
        "questions": dict(sorted(asked.items())),
        "ks": list(ks),
        "confidence_at_k": DEFAULT_LIMIT if DEFAULT_LIMIT in ks else max(ks),
        "modes": {},
    }
    for mode, mode_scores in scores.items():
        by_kind: dict[str, Any] = {}
        for kind in kinds:
            by_kind[kind] = {
                f"@{k}": {
                    "recall": _share(mode_scores.any_hit[(kind, k)], asked[kind]),
                    "all_evidence": _share(mode_scores.all_hit[(kind, k)], asked[kind]),
                }
                for k in ks
            }
        overall = {
            f"@{k}": {
                "recall": _share(sum(mode_scores.any_hit[(kind, k)] for kind in kinds), answerable),
                "all_evidence": _share(sum(mode_scores.all_hit[(kind, k)] for kind in kinds), answerable),
            }
            for k in ks
        }
        rows = ("answerable_top_right", "answerable_top_wrong", NO_ANSWER)
        confusion = {row: {lvl: mode_scores.confidence[(row, lvl)] for lvl in CONFIDENCE_LEVELS} for row in rows}
        out["modes"][mode] = {"overall": overall, "by_kind": by_kind, "answer_confidence": confusion}
    return out


def _share(hits: int, questions: int) -> float:
    return round(hits / questions, 4) if questions else 0.0


def render(result: dict[str, Any]) -> str:
    """The summary as text tables: recall@k and all-evidence@k per kind and mode, then the confusion tables."""
    ks = result["ks"]
    modes = list(result["modes"])
    lines = [
        f"recall_eval {result['dataset_version']}, split {result['split']}: {result['conversations']} conversations, "
        f"{result['memories']} memories, {sum(result['questions'].values())} questions "
        f"({_counts(result['questions'])}); embedder {result['embedder']}",
        "",
        "evidence recall@k (any evidence turn in the top k) / all-evidence-hit@k (every evidence turn in the top k)",
    ]
    header = f"{'kind':<12} {'mode':<9}" + "".join(f" {'@' + str(k):>13}" for k in ks)
    lines.append(header)
    kinds = [*result["modes"][modes[0]]["by_kind"], "overall"]
    for kind in kinds:
        for mode in modes:
            figures = result["modes"][mode]
            row = figures["overall"] if kind == "overall" else figures["by_kind"][kind]
            cells = "".join(f" {row[f'@{k}']['recall']:>6.3f}/{row[f'@{k}']['all_evidence']:<6.3f}" for k in ks)
            lines.append(f"{kind:<12} {mode:<9}{cells}")
    lines += ["", f"answer_confidence at k={result['confidence_at_k']} (questions per verdict)"]
    lines.append(f"{'mode':<9} {'questions':<22}" + "".join(f" {level:>7}" for level in CONFIDENCE_LEVELS))
    for mode in modes:
        for row, counts in result["modes"][mode]["answer_confidence"].items():
            lines.append(f"{mode:<9} {row:<22}" + "".join(f" {counts[level]:>7}" for level in CONFIDENCE_LEVELS))
    return "\n".join(lines)


def _counts(asked: dict[str, int]) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in asked.items())


def parse_modes(value: str) -> list[RecallMode]:
    modes: list[RecallMode] = []
    for part in value.split(","):
        mode = next((m for m in RECALL_MODES if m == part.strip()), None)
        if mode is None:
            raise ValueError(f"unknown mode {part!r}: use {', '.join(RECALL_MODES)}")
        modes.append(mode)
    return modes


def parse_ks(value: str) -> list[int]:
    ks = sorted({int(part) for part in value.split(",")})
    if not ks or ks[0] < 1 or ks[-1] > 100:
        raise ValueError("k must be between 1 and 100")
    return ks
