"""Shape of the recall-eval dataset (memory/recall_eval/dataset_v1.json): counts, ids, evidence, dates. No database."""

from __future__ import annotations

import json
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

import pytest

DATASET = Path(__file__).resolve().parents[2] / "memory" / "recall_eval" / "dataset_v1.json"
KINDS = {"single_hop", "identifier", "temporal", "paraphrase", "multi_hop", "no_answer"}


@pytest.fixture(scope="module")
def dataset() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATASET.read_text(encoding="utf-8"))
    return data


def _questions(dataset: dict[str, Any]) -> list[dict[str, Any]]:
    return [q for c in dataset["conversations"] for q in c["questions"]]


def test_header_and_sizes(dataset):
    assert dataset["version"] == "v1"
    assert dataset["description"].strip()
    assert len(dataset["conversations"]) >= 12
    assert len(_questions(dataset)) >= 180
    for conv in dataset["conversations"]:
        assert 3 <= len(conv["sessions"]) <= 5, conv["id"]
        for session in conv["sessions"]:
            assert 15 <= len(session["turns"]) <= 40, session["id"]


def test_every_kind_is_known_and_has_at_least_20_questions(dataset):
    kinds = Counter(q["kind"] for q in _questions(dataset))
    assert set(kinds) == KINDS
    assert all(n >= 20 for n in kinds.values()), kinds


def test_ids_are_unique_dataset_wide(dataset):
    ids = [c["id"] for c in dataset["conversations"]]
    for conv in dataset["conversations"]:
        ids += [s["id"] for s in conv["sessions"]]
        ids += [t["id"] for s in conv["sessions"] for t in s["turns"]]
        ids += [q["id"] for q in conv["questions"]]
    duplicates = [i for i, n in Counter(ids).items() if n > 1]
    assert not duplicates


def test_turns_are_spoken_by_the_conversation_speakers(dataset):
    for conv in dataset["conversations"]:
        for session in conv["sessions"]:
            for turn in session["turns"]:
                assert turn["speaker"] in conv["speakers"], turn["id"]
                assert turn["text"].strip(), turn["id"]


def test_evidence_exists_in_the_same_conversation(dataset):
    for conv in dataset["conversations"]:
        turn_ids = {t["id"] for s in conv["sessions"] for t in s["turns"]}
        for q in conv["questions"]:
            assert q["question"].strip(), q["id"]
            assert len(q["evidence"]) == len(set(q["evidence"])), q["id"]
            assert set(q["evidence"]) <= turn_ids, q["id"]


def test_no_answer_questions_have_no_evidence_and_the_others_do(dataset):
    for q in _questions(dataset):
        if q["kind"] == "no_answer":
            assert (q["evidence"], q["answer"]) == ([], None), q["id"]
        else:
            assert q["evidence"], q["id"]
            assert isinstance(q["answer"], str), q["id"]
            assert q["answer"].strip(), q["id"]
        if q["kind"] == "multi_hop":
            assert len(q["evidence"]) >= 2, q["id"]


def test_session_dates_are_iso_and_increase_within_a_conversation(dataset):
    for conv in dataset["conversations"]:
        dates = [date.fromisoformat(s["date"]) for s in conv["sessions"]]
        assert [d.isoformat() for d in dates] == [s["date"] for s in conv["sessions"]], conv["id"]
        assert dates == sorted(set(dates)), conv["id"]
