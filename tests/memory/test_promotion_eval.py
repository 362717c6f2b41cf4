"""The promotion eval on the shipped dataset (reference §4.16, §6), for both compilers."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from loopmem.services import tenant_set_provider
from memory.models import PromotionEvalSnapshot, SessionTurn
from memory.promotion.evaluation import dice, load_dataset, promotion_eval, score

pytestmark = pytest.mark.django_db


@pytest.fixture
def replaying_llm(tenant, fake_llm):
    """The dataset's recorded model outputs, served in order by the loopback OpenAI-compatible server."""
    tenant_set_provider(tenant=tenant, llm="openai", llm_base_url=fake_llm.url, llm_api_key="sk-test")
    fake_llm.replies = [json.dumps(s["llm_output"]) for s in load_dataset("v1")["sessions"]]
    return fake_llm


def test_dice_is_over_token_sets():
    assert dice("The cat sat", "the CAT sat sat") == 1.0
    assert dice("a b", "c d") == 0.0
    assert dice("", "") == 0.0
    assert dice("red apple", "red pear") == 0.5


def test_greedy_scoring_claims_each_expected_fact_once():
    assert score(["email over phone", "email over phone"], ["prefers email over phone"]) == (1, 1, 0)
    assert score([], ["x"]) == (0, 0, 1)
    assert score(["unrelated words"], []) == (0, 1, 0)


def test_the_llm_compiler_replaying_the_dataset_scores_perfectly(tenant, replaying_llm, capsys):
    call_command("promotion_eval", "--tenant", "acme", "--compiler", "openai", "--json")
    result = json.loads(capsys.readouterr().out)
    assert result["dataset_version"] == "v1"
    assert (result["session_count"], result["true_positives"], result["false_positives"]) == (3, 3, 0)
    assert (result["false_negatives"], result["precision"], result["recall"]) == (0, 1.0, 1.0)
    assert result["sessions"] == [
        {"id": "durable-preferences", "tp": 2, "fp": 0, "fn": 0},
        {"id": "mixed-noise", "tp": 1, "fp": 0, "fn": 0},
        {"id": "injection-adversarial", "tp": 0, "fp": 0, "fn": 0},
    ]
    # The injection session reached the model only as fenced data.
    assert "<<<SESSION_CONTENT>>>\n[user] Let's finish reconciling" in replaying_llm.user_messages[2]


def test_the_extractive_compiler_emits_nothing_from_user_turns(tenant):
    result = promotion_eval(tenant=tenant, compiler_name="extractive")
    assert (result.true_positives, result.false_positives, result.false_negatives) == (0, 0, 3)
    assert (result.precision, result.recall) == (None, 0.0)


def test_the_eval_always_cleans_up_and_stores_one_snapshot_a_day(tenant, replaying_llm):
    promotion_eval(tenant=tenant, compiler_name="openai")
    replaying_llm.replies = [json.dumps(s["llm_output"]) for s in load_dataset("v1")["sessions"]]
    promotion_eval(tenant=tenant, compiler_name="openai")
    assert not SessionTurn.objects.exists()
    snapshot = PromotionEvalSnapshot.objects.get()
    assert (snapshot.compiler, snapshot.precision, snapshot.recall, snapshot.session_count) == ("openai", 1.0, 1.0, 3)


def test_a_compile_failure_counts_as_nothing_emitted_and_still_cleans_up(tenant, replaying_llm):
    replaying_llm.status = 500
    result = promotion_eval(tenant=tenant, compiler_name="openai")
    assert (result.true_positives, result.false_negatives) == (0, 3)
    assert not SessionTurn.objects.exists()


def test_the_human_readable_table(tenant, capsys):
    call_command("promotion_eval", "--tenant", "acme", "--compiler", "extractive")
    out = capsys.readouterr().out
    assert "durable-preferences" in out
    assert "precision n/a, recall 0.00" in out


def test_the_daily_task_scores_only_tenants_with_a_usable_llm(tenant, other_tenant, replaying_llm):
    from memory.tasks import promotion_eval_task

    assert promotion_eval_task() == 1
    assert PromotionEvalSnapshot.objects.get().tenant_id == tenant.id
