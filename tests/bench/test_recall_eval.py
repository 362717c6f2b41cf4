"""recall_eval runs end to end on a tiny dataset of the same shape, with the local MiniLM embedder, and cleans up."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from loopmem.models import Tenant
from memory.models import Memory

pytestmark = pytest.mark.django_db(
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
                 "answer": "runner 4.2", "evidence": ["c1-t1", "c1-t2"]},
                {"id": "c1-q2", "kind": "no_answer", "question": "What does Pepper eat?", "answer": None,
                 "evidence": []},
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
                 "answer": "2026-01-31", "evidence": ["c2-t1"]},
            ],
        },
    ],
}  # fmt: skip


def run(tmp_path: Path, *args: str) -> dict[str, Any]:
    dataset = tmp_path / "dataset.json"
    dataset.write_text(json.dumps(DATASET), encoding="utf-8")
    out = io.StringIO()
    call_command("recall_eval", "--dataset", str(dataset), *args, "--json", stdout=out)
    result: dict[str, Any] = json.loads(out.getvalue())
    return result


def test_every_mode_kind_and_k_is_scored_and_the_scratch_tenant_is_gone(tmp_path):
    result = run(tmp_path, "--k", "1,3")
    assert (result["embedder"], result["memories"], result["conversations"]) == ("local", 5, 2)
    assert result["questions"] == {"identifier": 1, "no_answer": 1, "temporal": 1}
    assert set(result["modes"]) == {"semantic", "keyword", "hybrid"}
    for mode, figures in result["modes"].items():
        assert set(figures["by_kind"]) == {"identifier", "temporal"}  # no_answer has no evidence to find
        assert set(figures["overall"]) == {"@1", "@3"}
        # Three turns per subject at most: at k=3 any lane that scores every turn finds all the evidence; the
        # keyword lane never returns "Version 4.2, since the outage." (none of the question's words).
        assert figures["overall"]["@3"]["recall"] == 1.0
        assert figures["overall"]["@3"]["all_evidence"] == (0.5 if mode == "keyword" else 1.0)
        confusion = figures["answer_confidence"]
        assert sum(confusion["no_answer"].values()) == 1
        assert sum(confusion["answerable_top_right"].values()) + sum(confusion["answerable_top_wrong"].values()) == 2
    assert result["confidence_at_k"] == 3  # the largest k when the default limit (10) is not asked for
    assert not Tenant.objects.filter(slug__startswith="recall-eval-").exists()
    assert not Memory.objects.exists()


def test_the_text_report_names_every_mode(tmp_path):
    dataset = tmp_path / "dataset.json"
    dataset.write_text(json.dumps(DATASET), encoding="utf-8")
    out = io.StringIO()
    call_command("recall_eval", "--dataset", str(dataset), "--mode", "keyword,hybrid", "--k", "2", stdout=out)
    text = out.getvalue()
    assert "overall      keyword" in text
    assert "overall      hybrid" in text
    assert "semantic" not in text.split("evidence recall@k")[1].split("answer_confidence")[0]


@pytest.mark.parametrize(("option", "value"), [("--mode", "fuzzy"), ("--k", "0"), ("--k", "101")])
def test_bad_options_are_refused(tmp_path, option, value):
    with pytest.raises(CommandError):
        run(tmp_path, option, value)
