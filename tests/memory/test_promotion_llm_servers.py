"""The `openai` compiler against OpenAI, Ollama and vLLM through `base_url`: JSON mode where the server has it,
the fail-closed parser where it does not (a loopback server plays each one; see tests/fake_llm.py)."""

from __future__ import annotations

import email.utils
import json
import time

import pytest

from loopmem.providers import llm
from loopmem.tenancy.services import tenant_set_provider
from memory.models import Memory, PromotionJob
from memory.promotion import jobs as promotion
from memory.promotion.compilers import SYSTEM_PROMPT, Candidate, CompileFailed, LLMCompiler
from memory.promotion.evaluation import EvalTurn
from tests.memory.conftest import heavy_db

RESHIP = "Always reship expedited instead of refunding a lost package."
ESCALATE = "Escalate to a human supervisor after two failed delivery attempts."
FACTS = [{"text": RESHIP, "confidence": 0.92, "tags": ["shipping"]}, {"text": ESCALATE, "confidence": 0.88}]
TURNS = [EvalTurn("user", "I always reship expedited instead of refunding."), EvalTurn("assistant", "Noted.")]
EXPECTED = [
    Candidate(text=RESHIP, confidence=0.92, tags=("shipping",)),
    Candidate(text=ESCALATE, confidence=0.88),
]


def compiler_for(fake_llm, model: str = "m") -> LLMCompiler:
    return LLMCompiler(llm.LLMSpec(provider="openai", model=model, base_url=fake_llm.url, api_key="sk-local"))


@pytest.mark.parametrize("server", ["openai", "ollama", "vllm"])
def test_json_mode_is_asked_for_and_the_servers_that_have_it_serve_it(server, fake_llm):
    fake_llm.json_mode = server
    fake_llm.reply = json.dumps({"candidates": FACTS})

    assert compiler_for(fake_llm).compile(TURNS) == EXPECTED

    [request] = fake_llm.requests
    assert request["response_format"] == {"type": "json_object"}
    assert (request["model"], request["temperature"], request["messages"][0]["content"]) == ("m", 0, SYSTEM_PROMPT)
    assert '{"candidates": [...]}' in SYSTEM_PROMPT  # JSON mode answers an object: the prompt asks for that one


def test_a_bare_array_is_still_accepted_from_a_server_without_json_mode(fake_llm):
    fake_llm.json_mode = "vllm-without-guided-decoding"
    fake_llm.reply = json.dumps(FACTS)

    assert compiler_for(fake_llm, model="array-model").compile(TURNS) == EXPECTED


def test_a_server_that_refuses_json_mode_is_asked_again_without_it_and_not_asked_for_it_again(fake_llm):
    fake_llm.json_mode = "vllm-without-guided-decoding"
    fake_llm.reply = json.dumps({"candidates": FACTS})  # fenced by the unconstrained model; the parser strips it
    compiler = compiler_for(fake_llm, model="no-guided")

    assert compiler.compile(TURNS) == EXPECTED
    assert compiler.compile(TURNS) == EXPECTED

    assert ["response_format" in r for r in fake_llm.requests] == [True, False, False]


def test_without_json_mode_prose_around_the_json_fails_closed(fake_llm):
    fake_llm.json_mode = "vllm-without-guided-decoding"
    fake_llm.reply = f"Here are the facts I found: {json.dumps(FACTS)}"

    with pytest.raises(CompileFailed) as failed:
        compiler_for(fake_llm, model="chatty").compile(TURNS)

    assert failed.value.reason == "json_parse_error"


def test_an_unrelated_400_is_a_provider_error_and_is_not_retried_without_json_mode(fake_llm):
    fake_llm.status = 400  # e.g. a context-length error: nothing to do with JSON mode

    with pytest.raises(CompileFailed) as failed:
        compiler_for(fake_llm, model="small-context").compile(TURNS)

    assert failed.value.reason == "llm_provider_error_400"
    assert len(fake_llm.requests) == 1


@heavy_db
def test_a_tenant_on_a_server_without_json_mode_promotes_end_to_end(agent, tenant, fake_llm):
    fake_llm.json_mode = "vllm-without-guided-decoding"
    fake_llm.reply = json.dumps({"candidates": FACTS})
    tenant_set_provider(tenant=tenant, llm="openai", llm_base_url=fake_llm.url, llm_api_key="sk-local", llm_model="v")
    for role, content in (("user", "I always reship expedited instead of refunding."), ("assistant", "Noted.")):
        agent.post("/api/v1/memory", {"tier": "session", "session_id": "s", "role": role, "content": content},
                   format="json")  # fmt: skip
    assert agent.post("/api/v1/memory/promote", {"session_id": "s"}, format="json").status_code == 202

    outcome = promotion.promotion_run(job_id=str(PromotionJob.objects.get().id))

    assert outcome.outcome == "promoted"
    assert sorted(Memory.objects.values_list("text", flat=True)) == sorted([RESHIP, ESCALATE])
    assert PromotionJob.objects.get().compiler == "openai"


@pytest.mark.parametrize(
    ("retry_after", "expected"),
    [("3", (3.0, 3.0)), ("in a bit", None), ("inf", None), ("-5", None), ("HTTP-date", (0.0, 2.0))],
)
def test_a_rate_limited_llm_reports_its_retry_after_in_either_form(fake_llm, retry_after, expected):
    # RFC 9110 allows seconds or an HTTP-date; an unreadable or unusable value is no hint, never a crash.
    if retry_after == "HTTP-date":
        retry_after = email.utils.formatdate(time.time() + 1, usegmt=True)
    fake_llm.status, fake_llm.headers = 429, {"retry-after": retry_after}
    spec = llm.LLMSpec(provider="openai", model="m", base_url=fake_llm.url, api_key="sk-local")
    with pytest.raises(llm.LLMRateLimited) as caught:
        llm.complete_json(spec, system="s", user="u")
    if expected is None:
        assert caught.value.retry_after is None
    else:
        low, high = expected
        assert caught.value.retry_after is not None
        assert low <= caught.value.retry_after <= high
