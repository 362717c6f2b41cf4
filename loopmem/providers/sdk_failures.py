"""What the `openai` SDK raises, as a caller's own typed failures: one mapping for embeddings and the chat LLM.

The SDK fails four ways that matter here: a timeout, an unreachable server, a 429 and any other HTTP error. Each
caller names its own failure for each (its own types, so its own reason tags); the mapping, and the reading of a
provider's Retry-After, are written once.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class SdkFailures:
    """A caller's failure for each way an SDK call fails; each takes the SDK's message."""

    timeout: Callable[[str], Exception]
    unreachable: Callable[[str], Exception]
    # (status, message, the provider's Retry-After in seconds or None)
    http_error: Callable[[int, str, float | None], Exception]
    # A 429, for a caller that waits rather than fails on it; None: a 429 is an `http_error` like any other.
    rate_limited: Callable[[str, float | None], Exception] | None = None


@contextmanager
def sdk_failures(failures: SdkFailures) -> Iterator[None]:
    """Run an SDK call; what it raises leaves as the caller's own failure (the SDK's exception as its cause)."""
    import openai  # the SDK is heavy to import; processes that never call a provider skip it

    try:
        yield
    except openai.APITimeoutError as exc:  # before APIConnectionError, its base class
        raise failures.timeout(str(exc)) from exc
    except openai.APIConnectionError as exc:
        raise failures.unreachable(str(exc)) from exc
    except openai.APIStatusError as exc:
        header = exc.response.headers.get("retry-after") if exc.response is not None else None
        retry_after = retry_after_seconds(header)
        if failures.rate_limited is not None and isinstance(exc, openai.RateLimitError):
            raise failures.rate_limited(str(exc), retry_after) from exc
        raise failures.http_error(exc.status_code, str(exc), retry_after) from exc


def retry_after_seconds(value: str | None) -> float | None:
    """A provider's Retry-After in seconds: delta-seconds or an HTTP-date (RFC 9110 allows both); None when it is
    missing, unreadable, negative or not finite (a wait of `inf` would park a task forever)."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = max(when.timestamp() - time.time(), 0.0)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
