"""Fit the offline distiller's model on the dev halves of datasets v2 and v3 (never on test), and estimate it honestly.

    manage.py distiller_fit         # refit distiller_model.json on dev
    manage.py distiller_fit --cv    # leave-one-session-out on dev: the honest dev estimate; writes nothing

A candidate sentence is a positive when it matches a gold fact of its session under the eval's match rule
(`memory.promotion.evaluation`). Scoring a split is `manage.py promotion_eval --compiler extractive --split ...`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from memory.promotion.compilers import Candidate, screen
from memory.promotion.distiller import (
    FEATURES,
    MODEL_PATH,
    RULE_FEATURES,
    DistillerModel,
    Matrix,
    SentenceEmbedder,
    candidate_sentences,
    distill,
    prototype_features,
    rule_features,
)
from memory.promotion.evaluation import (
    MATCH_THRESHOLD,
    LabelledSession,
    Tally,
    cosine_matrix,
    labelled_sessions,
    matches,
)

L2_PENALTY = 1.0
PREFILTER_RECALL = 0.98
PREFILTER_MAX = 0.2
FIT_DATASETS = ("v2", "v3")  # v3 brings the look-alikes of injections, plain facts and five more languages


def dev_sessions() -> list[LabelledSession]:
    """The dev halves the distiller is fitted on; test halves are never read here."""
    return [session for version in FIT_DATASETS for session in labelled_sessions(version, "dev")]


def fit(
    sessions: Sequence[LabelledSession],
    *,
    embedder: SentenceEmbedder,
    supersede_threshold: float = 0.55,
    restatement_threshold: float = 0.7,
    dedupe_threshold: float = 0.9,
) -> dict[str, Any]:
    """Fit the logistic model on the sessions' candidate sentences; returns distiller_model.json's content.

    Prototype similarities are computed leave-one-session-out, so a dev sentence never meets its own gold fact.
    """
    per_session = []
    for session in sessions:
        sentences = candidate_sentences(session.turns)
        texts = [s.text for s in sentences]
        gold = [g.text for g in session.gold]
        similarity = cosine_matrix(embedder, texts, gold)
        labels = [int(bool(matches([t], gold, similarity[i : i + 1]))) for i, t in enumerate(texts)]
        vectors = np.asarray(embedder.embed(texts), dtype=np.float64) if texts else np.zeros((0, 384))
        gold_vectors = np.asarray(embedder.embed(gold), dtype=np.float64) if gold else np.zeros((0, 384))
        per_session.append((sentences, labels, vectors, gold_vectors, gold))
    rows, targets = [], []
    for index, (sentences, labels, vectors, _, _) in enumerate(per_session):
        if not sentences:
            continue
        others = [s for i, s in enumerate(per_session) if i != index]
        positives = np.vstack([o[3] for o in others if len(o[3])])
        negatives = np.vstack([o[2][[i for i, y in enumerate(o[1]) if not y]] for o in others if len(o[2])])
        prototype = prototype_features(vectors, positives, negatives)
        for i, sentence in enumerate(sentences):
            rows.append([*rule_features(sentence), *prototype[i]])
            targets.append(labels[i])
    x = np.array(rows)
    y = np.array(targets, dtype=np.float64)
    prefilter_bias, prefilter_weights = _logistic(x[:, :-2], y)
    prefilter = 1.0 / (1.0 + np.exp(-(x[:, :-2] @ np.array(prefilter_weights) + prefilter_bias)))
    # The rules alone set aside the sentences that are plainly not facts before anything is embedded: the cutoff
    # lets PREFILTER_RECALL of dev's gold sentences through, and never more than PREFILTER_MAX.
    positives = np.sort(prefilter[y == 1])
    cutoff = min(PREFILTER_MAX, float(positives[int(len(positives) * (1 - PREFILTER_RECALL))])) if len(positives) else 0
    mean, scale = x[:, -2:].mean(axis=0), x[:, -2:].std(axis=0) + 1e-9
    x[:, -2:] = (x[:, -2:] - mean) / scale
    bias, weights = _logistic(x, y)
    return {
        "fitted_on": f"promotion/datasets/dataset_{{{', '.join(FIT_DATASETS)}}}.json, split dev",
        "match_threshold": MATCH_THRESHOLD,
        "candidates": len(targets),
        "positives": int(sum(targets)),
        "bias": round(bias, 4),
        "weights": {name: round(w, 4) for name, w in zip(FEATURES, weights, strict=True)},
        "prefilter_bias": round(prefilter_bias, 4),
        "prefilter_weights": {name: round(w, 4) for name, w in zip(RULE_FEATURES, prefilter_weights, strict=True)},
        "prefilter_cutoff": round(cutoff, 4),
        "prefiltered_share": round(float((prefilter < cutoff).mean()), 3),
        "prototype_mean": [round(float(m), 4) for m in mean],
        "prototype_scale": [round(float(v), 4) for v in scale],
        "supersede_threshold": supersede_threshold,
        "restatement_threshold": restatement_threshold,
        "dedupe_threshold": dedupe_threshold,
        "positive_prototypes": [g for _, _, _, _, gold in per_session for g in gold],
        "negative_prototypes": [
            s.text for sentences, labels, *_ in per_session for s, y in zip(sentences, labels, strict=True) if not y
        ],
    }


def cross_validate(*, embedder: SentenceEmbedder) -> Tally:
    """Leave-one-session-out on dev: each session distilled by a model fitted on the others, then screened."""
    dev = dev_sessions()
    tally = Tally()
    for index, session in enumerate(dev):
        model = DistillerModel.from_dict(fit([*dev[:index], *dev[index + 1 :]], embedder=embedder))
        facts = distill(session.turns, embedder=embedder, model=model)
        candidates = [Candidate(text=f.text, confidence=f.confidence, source_turn=f.turn_index) for f in facts]
        kept = screen(candidates, turns=session.turns, scope=None).kept
        emitted = [c.text for c in kept]
        gold = [g.text for g in session.gold]
        matched = len(matches(emitted, gold, cosine_matrix(embedder, emitted, gold)))
        tally.add(Tally(tp=matched, fp=len(emitted) - matched, fn=len(gold) - matched))
    return tally


def _logistic(x: Matrix, y: Matrix, iterations: int = 50) -> tuple[float, list[float]]:
    """L2-penalised logistic regression by Newton's method (the bias is not penalised); deterministic."""
    design = np.column_stack([np.ones(len(x)), x])
    beta = np.zeros(design.shape[1])
    penalty = np.diag([0.0, *([L2_PENALTY] * x.shape[1])])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-design @ beta))
        gradient = design.T @ (p - y) + penalty @ beta
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return float(beta[0]), [float(b) for b in beta[1:]]


def refit(*, embedder: SentenceEmbedder) -> dict[str, Any]:
    """Fit on dev and write distiller_model.json; returns what was written."""
    model = fit(dev_sessions(), embedder=embedder)
    MODEL_PATH.write_text(json.dumps(model, indent=1, ensure_ascii=False) + "\n")
    return model
