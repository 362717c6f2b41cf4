"""The chat LLM behind promotion: one call, `complete_json(system, user) -> str`, with typed failures.

Only the `openai` provider is an LLM (the real SDK; any OpenAI-compatible `base_url`: OpenAI, Ollama, vLLM;
per-tenant key). The deployment default `extractive` needs no LLM at all: see memory.promotion.compilers.

JSON mode (`response_format={"type": "json_object"}`) is asked for, because OpenAI, Ollama and vLLM all honour
it. A server that refuses it with a 400 or 422 naming `response_format` (an older or differently built server)
is asked again without it, and that endpoint is not asked for JSON mode again by this process; the caller's
fail-closed parser is then the only guard, as it always is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from django.conf import settings

from loopmem.models import Tenant
from loopmem.providers import clients
from loopmem.providers.sdk_failures import SdkFailures, sdk_failures

if TYPE_CHECKING:
    import openai

LLM_TIMEOUT_SECONDS = 25.0
LLM_MAX_TOKENS = 4000
DEFAULT_MODELS = {"openai": "gpt-4o-mini"}
JSON_MODE = {"type": "json_object"}
# What a server says when it cannot do JSON mode (vLLM, llama.cpp and LiteLLM word it differently; all name it).
_JSON_MODE_REFUSAL = re.compile(r"response_format|json_object|json mode|guided[_ ]decoding", re.IGNORECASE)
# (base_url, model) pairs that refused JSON mode in this process: asked without it from then on.
_NO_JSON_MODE: set[tuple[str, str]] = set()


class LLMFailure(Exception):
    """The LLM could not answer; `reason` is a stable tag for logs and job records."""

    reason: ClassVar[str] = "llm_error"

    def __init__(self, message: str = "", *, retry_after: float | None = None) -> None:
        super().__init__(message or self.reason)
        self.retry_after = retry_after


class NoLLMKey(LLMFailure):
    reason = "no_llm_key"


class LLMTimeout(LLMFailure):
    reason = "llm_timeout"


class LLMRequestFailed(LLMFailure):
    reason = "llm_request_failed"


class LLMRateLimited(LLMFailure):
    """The provider asked us to slow down: wait, do not count it as a failed attempt."""

    reason = "llm_rate_limited"


class LLMProviderError(LLMFailure):
    def __init__(self, status: int, message: str = "") -> None:
        super().__init__(message)
        self.status = status

    @property
    def tag(self) -> str:
        return f"llm_provider_error_{self.status}"


# A 429 is a wait, not a failed attempt (`LLMRateLimited`, with the Retry-After); any other HTTP error is a failure.
SDK_FAILURES = SdkFailures(
    timeout=LLMTimeout,
    unreachable=LLMRequestFailed,
    http_error=lambda status, message, retry_after: LLMProviderError(status, message),
    rate_limited=lambda message, retry_after: LLMRateLimited(message, retry_after=retry_after),
)


@dataclass(frozen=True)
class LLMSpec:
    """Which provider and model a tenant compiles with (its overrides over the deployment defaults)."""

    provider: str
    model: str = ""
    base_url: str = ""
    api_key: str = ""


def llm_spec_for(tenant: Tenant | None) -> LLMSpec:
    """The tenant's LLM: its own settings where set, else the deployment's (no tenant: the deployment's)."""
    own = (
        clients.ProviderChoice(tenant.llm_provider, tenant.llm_model, tenant.llm_base_url, tenant.llm_api_key)
        if tenant is not None
        else clients.ProviderChoice("", "", "", "")
    )
    resolved = clients.resolve_provider(
        own,
        clients.ProviderChoice(settings.LLM_PROVIDER, settings.LLM_MODEL, settings.LLM_BASE_URL, settings.LLM_API_KEY),
        DEFAULT_MODELS,
    )
    return LLMSpec(
        provider=resolved.provider, model=resolved.model, base_url=resolved.base_url, api_key=resolved.api_key
    )


def complete_json(spec: LLMSpec, *, system: str, user: str) -> str:
    """One chat completion at temperature 0, in JSON mode where the server has it; returns the raw text (the
    caller parses, fail-closed)."""
    import openai

    if not spec.api_key:
        raise NoLLMKey("no LLM API key is configured for this tenant or deployment")
    client = clients.openai_client(
        base_url=spec.base_url, api_key=spec.api_key, timeout=LLM_TIMEOUT_SECONDS, max_retries=1
    )
    request: dict[str, Any] = {
        "model": spec.model,
        "temperature": 0,
        "max_tokens": LLM_MAX_TOKENS,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }
    endpoint = (spec.base_url, spec.model)
    with sdk_failures(SDK_FAILURES):
        if endpoint in _NO_JSON_MODE:
            response = _create(client, request)
        else:
            try:
                response = _create(client, {**request, "response_format": JSON_MODE})
            except openai.APIStatusError as exc:
                if exc.status_code not in (400, 422) or not _JSON_MODE_REFUSAL.search(str(exc)):
                    raise
                _NO_JSON_MODE.add(endpoint)
                response = _create(client, request)
    choice = response.choices[0] if response.choices else None
    return (choice.message.content or "") if choice is not None else ""


def _create(client: openai.OpenAI, request: dict[str, Any]) -> Any:
    return client.chat.completions.create(**request)
