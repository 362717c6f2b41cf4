"""Which outside provider a tenant calls, and the one `openai` client per endpoint each process reuses.

Embeddings and the chat LLM resolve their provider the same way: the tenant's own settings where set, else the
deployment's. The deployment's API key goes only to the deployment's own endpoint: a tenant that points at its
own server (or picks another provider) must bring its own key, or that server would receive ours.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import openai

CLIENT_CACHE_SIZE = 64  # distinct (endpoint, key, timeout) triples one process keeps clients for


@dataclass(frozen=True)
class ProviderChoice:
    """A provider, model, endpoint and key: the tenant's overrides, the deployment's defaults, or the result."""

    provider: str
    model: str
    base_url: str
    api_key: str


def resolve_provider(
    tenant: ProviderChoice, deployment: ProviderChoice, default_models: dict[str, str]
) -> ProviderChoice:
    """The tenant's provider, model, endpoint and key, each falling back to the deployment's where allowed."""
    uses_default_provider = not tenant.provider
    provider = tenant.provider or deployment.provider
    model = tenant.model or (deployment.model if uses_default_provider else "")
    uses_default_endpoint = uses_default_provider and not tenant.base_url
    return ProviderChoice(
        provider=provider,
        model=model or default_models.get(provider, ""),
        base_url=tenant.base_url or (deployment.base_url if uses_default_provider else ""),
        api_key=tenant.api_key or (deployment.api_key if uses_default_endpoint else ""),
    )


_CLIENT_BUILD = threading.Lock()


def openai_client(*, base_url: str, api_key: str, timeout: float, max_retries: int) -> openai.OpenAI:
    """A shared client per endpoint: building one costs tens of milliseconds and opens a new connection pool.

    The client is thread-safe (its httpx connection pool is), and keeps connections alive between calls, so a
    gunicorn worker's threads share one pool. The lock makes two threads asking at once get the same client.
    """
    with _CLIENT_BUILD:
        return _openai_client(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)


@functools.lru_cache(maxsize=CLIENT_CACHE_SIZE)
def _openai_client(*, base_url: str, api_key: str, timeout: float, max_retries: int) -> openai.OpenAI:
    import openai  # the SDK is heavy to import; processes that never call a provider skip it

    return openai.OpenAI(api_key=api_key, base_url=base_url or None, timeout=timeout, max_retries=max_retries)
