"""recall_eval: its scores on hand-made rankings, its split selection, the team dataset's splits, and an end-to-end run
on a tiny dataset of the same shape, with the local MiniLM embedder, that cleans up."""

from __future__ import annotations

import copy
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from bench import recall_eval
from bench.recall_eval import Corpus, ModeScores, Question
from loopmem.models import Tenant
from memory.models import Memory

end_to_end = pytest.mark.django_db(
    transaction=True,
    databases=["default", "heavy_read"],
    available_apps=["loopmem", "projects", "memory", "knowledge", "bench"],
)

DATASET: dict[str, Any] = {
    "version": "tiny",
    "description": "two conversations",
    "conversations": [
        {
            "id": "c1",
            "speakers": ["Ana", "Ben"],
            "sessions": [
                {
                    "id": "c1-s1",
                    "date": "2026-01-05",
                    "turns": [
                        {"id": "c1-t1", "speaker": "Ana", "text": "Which runner image does deploy-prod.yaml pin?"},
                        {"id": "c1-t2", "speaker": "Ben", "text": "Version 4.2, since the outage."},
                        {"id": "c1-t3", "speaker": "Ana", "text": "My cat Pepper hates the vacuum cleaner."},
                    ],
                }
            ],
            "questions": [
                {"id": "c1-q1", "kind": "identifier", "question": "What does deploy-prod.yaml pin?",
                 "answer": "runner 4.2", "evidence": ["c1-t1", "c1-t2"], "split": "dev"},
                {"id": "c1-q2", "kind": "no_answer", "question": "What does Pepper eat?", "answer": None,
                 "evidence": [], "split": "test"},
            ],
        },
        {
            "id": "c2",
            "speakers": ["Cy", "Di"],
            "sessions": [
                {
                    "id": "c2-s1",
                    "date": "2026-02-01",
                    "turns": [
                        {"id": "c2-t1", "speaker": "Cy", "text": "Last Saturday I ran the Brighton half marathon."},
                        {"id": "c2-t2", "speaker": "Di", "text": "Nice! Did the knee hold up?"},
                    ],
                }
            ],
            "questions": [
                {"id": "c2-q1", "kind": "temporal", "question": "When did Cy run in Brighton?",
                 "answer": "2026-01-31", "evidence": ["c2-t1"], "split": "test"},
            ],
        },
    ],
}  # fmt: skip


def run(tmp_path: Path, *args: str, dataset: dict[str, Any] = DATASET) -> dict[str, Any]:
    path = tmp_path / "dataset.json"
    path.write_text(json.dumps(dataset), encoding="utf-8")
    out = io.StringIO()
    call_command("recall_eval", "--dataset", str(path), *args, "--json", stdout=out)
    result: dict[str, Any] = json.loads(out.getvalue())
    return result


def question(qid: str, kind: str, evidence: set[str], split: str = "dev") -> Question:
    return Question(qid, "s", kind, f"question {qid}?", frozenset(evidence), split)


def test_all_evidence_hit_counts_a_question_only_when_every_evidence_turn_is_in_the_top_k():
    """Hand-made rankings, so the figures are known: recall counts any evidence turn, all-evidence-hit every one."""
    rankings = [
        (question("q1", "multi_hop", {"a", "b"}), ["a", "x", "b", "y"]),  # any @1, all from @3
        (question("q2", "multi_hop", {"c", "d"}), ["c", "x", "y", "z"]),  # any @1, all never
        (question("q3", "multi_hop", {"e", "f", "g"}), ["x", "e", "f", "g"]),  # any @2, all only @4
        (question("q4", "temporal", {"h"}), ["x", "y", "h"]),  # one evidence turn: any = all, from @3
        (question("q5", "no_answer", set()), ["a", "b", "c"]),  # no evidence: counted in neither
    ]
    ks = [1, 3, 4]
    scores = ModeScores()
    for q, found in rankings:
        for k in ks:
            recall_eval.score_hits(scores, q, found, k)
    corpus = Corpus(tenant=Tenant(embedding_provider="local"), turn_of={}, questions=[q for q, _ in rankings])
    result = recall_eval.summary(corpus, {"hybrid": scores}, ks=ks, dataset_version="hand-made", split="dev")
    figures = result["modes"]["hybrid"]
    multi_hop = figures["by_kind"]["multi_hop"]
    assert [multi_hop[f"@{k}"]["recall"] for k in ks] == [0.6667, 1.0, 1.0]
    assert [multi_hop[f"@{k}"]["all_evidence"] for k in ks] == [0.0, 0.3333, 0.6667]
    temporal = figures["by_kind"]["temporal"]
    assert [temporal[f"@{k}"]["recall"] for k in ks] == [temporal[f"@{k}"]["all_evidence"] for k in ks] == [0, 1, 1]
    assert [figures["overall"][f"@{k}"]["recall"] for k in ks] == [0.5, 1.0, 1.0]  # of the 4 answerable
    assert [figures["overall"][f"@{k}"]["all_evidence"] for k in ks] == [0.0, 0.5, 0.75]
    assert set(figures["by_kind"]) == {"multi_hop", "temporal"}
    assert (result["split"], result["questions"]) == ("dev", {"multi_hop": 3, "no_answer": 1, "temporal": 1})
    text = recall_eval.render(result)
    assert "split dev" in text
    assert "multi_hop    hybrid     0.667/0.000   1.000/0.333   1.000/0.667" in text  # recall / all-evidence-hit


def test_a_split_selects_its_questions_and_refuses_unlabelled_or_unknown_ones():
    assert [q.id for q in recall_eval.select_questions(DATASET, "dev")] == ["c1-q1"]
    assert [q.id for q in recall_eval.select_questions(DATASET, "test")] == ["c1-q2", "c2-q1"]
    assert [q.id for q in recall_eval.select_questions(DATASET, "all")] == ["c1-q1", "c1-q2", "c2-q1"]
    unlabelled = copy.deepcopy(DATASET)
    del unlabelled["conversations"][1]["questions"][0]["split"]
    assert len(recall_eval.select_questions(unlabelled, "all")) == 3  # a dataset without splits runs whole
    with pytest.raises(ValueError, match="c2-q1 has no split"):
        recall_eval.select_questions(unlabelled, "test")
    mislabelled = copy.deepcopy(DATASET)
    mislabelled["conversations"][0]["questions"][0]["split"] = "train"
    with pytest.raises(ValueError, match="c1-q1 has split 'train'"):
        recall_eval.select_questions(mislabelled, "all")


def test_the_team_dataset_splits_every_kind_and_conversation_about_evenly():
    dataset = recall_eval.load_dataset()
    questions = [(c["id"], q) for c in dataset["conversations"] for q in c["questions"]]
    assert {q["split"] for _, q in questions} == {"dev", "test"}
    by_kind = Counter((q["kind"], q["split"]) for _, q in questions)
    kinds = {q["kind"] for _, q in questions}
    assert all(abs(by_kind[(kind, "dev")] - by_kind[(kind, "test")]) <= 1 for kind in kinds), by_kind
    by_conversation = Counter((conversation, q["split"]) for conversation, q in questions)
    conversations = {conversation for conversation, _ in questions}
    assert all(abs(by_conversation[(c, "dev")] - by_conversation[(c, "test")]) <= 2 for c in conversations), (
        by_conversation
    )
    by_group = Counter((conversation, q["kind"], q["split"]) for conversation, q in questions)
    assert all(
        abs(by_group[(c, kind, "dev")] - by_group[(c, kind, "test")]) <= 1 for c in conversations for kind in kinds
    )
    # Enough multi-hop and temporal questions to measure them on either split.
    assert by_kind[("multi_hop", "dev")] + by_kind[("multi_hop", "test")] >= 70
    assert by_kind[("temporal", "dev")] + by_kind[("temporal", "test")] >= 70


@end_to_end
def test_every_mode_kind_and_k_is_scored_and_the_scratch_tenant_is_gone(tmp_path):
    result = run(tmp_path, "--k", "1,3")
    assert (result["embedder"], result["memories"], result["conversations"]) == ("local", 5, 2)
    assert result["split"] == "all"
    assert result["questions"] == {"identifier": 1, "no_answer": 1, "temporal": 1}
    assert set(result["modes"]) == {"semantic", "keyword", "hybrid", "deep"}
    for mode, figures in result["modes"].items():
        assert set(figures["by_kind"]) == {"identifier", "temporal"}  # no_answer has no evidence to find
        assert set(figures["overall"]) == {"@1", "@3"}
        # Three turns per subject at most: at k=3 any lane that scores every turn finds all the evidence; the
        # keyword lane never returns "Version 4.2, since the outage." (none of the question's words).
        assert figures["overall"]["@3"]["recall"] == 1.0
        assert figures["overall"]["@3"]["all_evidence"] == (0.5 if mode == "keyword" else 1.0)
        # Two evidence turns cannot both be in a top 1, whatever the ranking.
        assert figures["by_kind"]["identifier"]["@1"]["all_evidence"] == 0.0
        confusion = figures["answer_confidence"]
        assert sum(confusion["no_answer"].values()) == 1
        assert sum(confusion["answerable_top_right"].values()) + sum(confusion["answerable_top_wrong"].values()) == 2
    assert result["confidence_at_k"] == 3  # the largest k when the default limit (10) is not asked for
    assert not Tenant.objects.filter(slug__startswith="recall-eval-").exists()
    assert not Memory.objects.exists()


@end_to_end
def test_a_split_asks_only_its_questions_among_every_memory(tmp_path):
    result = run(tmp_path, "--split", "test", "--mode", "semantic", "--k", "5")
    assert (result["split"], result["questions"]) == ("test", {"no_answer": 1, "temporal": 1})
    assert (result["memories"], result["conversations"]) == (5, 2)  # c1's turns are loaded for c2's question too
    assert set(result["modes"]["semantic"]["by_kind"]) == {"temporal"}
    assert result["modes"]["semantic"]["overall"]["@5"] == {"recall": 1.0, "all_evidence": 1.0}  # 2 turns, k = 5
    assert not Tenant.objects.filter(slug__startswith="recall-eval-").exists()


@end_to_end
def test_the_text_report_names_every_mode(tmp_path):
    dataset = tmp_path / "dataset.json"
    dataset.write_text(json.dumps(DATASET), encoding="utf-8")
    out = io.StringIO()
    call_command(
        "recall_eval", "--dataset", str(dataset), "--mode", "keyword,hybrid", "--k", "2", "--split", "dev", stdout=out
    )
    text = out.getvalue()
    assert "split dev" in text
    assert "overall      keyword" in text
    assert "overall      hybrid" in text
    assert "semantic" not in text.split("evidence recall@k")[1].split("answer_confidence")[0]


@end_to_end
@pytest.mark.parametrize(("option", "value"), [("--mode", "fuzzy"), ("--k", "0"), ("--k", "101"), ("--split", "train")])
def test_bad_options_are_refused(tmp_path, option, value):
    with pytest.raises(CommandError):
        run(tmp_path, option, value)


@end_to_end
def test_a_split_needs_labelled_questions(tmp_path):
    unlabelled = json.loads(json.dumps(DATASET).replace(', "split": "dev"', "").replace(', "split": "test"', ""))
    with pytest.raises(CommandError, match="has no split"):
        run(tmp_path, "--split", "dev", dataset=unlabelled)
    assert not Tenant.objects.filter(slug__startswith="recall-eval-").exists()
