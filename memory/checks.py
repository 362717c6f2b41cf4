"""System checks for memory settings: start-up fails rather than run with a configuration that loses data."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register


@register()
def promotion_ttl_invariant(app_configs: Any, **kwargs: Any) -> list[Error]:
    """interval < window < ttl: a turn must outlive the window, and every window must be swept before it closes."""
    interval = settings.PROMOTION_SWEEP_INTERVAL_SECONDS
    window = settings.PROMOTION_SWEEP_WINDOW_SECONDS
    ttl = settings.SESSION_TTL_SECONDS
    if interval < window < ttl:
        return []
    return [
        Error(
            f"Session settings break the promotion invariant interval < window < ttl "
            f"(got interval={interval}s, window={window}s, ttl={ttl}s): turns could expire before a promotion sweep "
            "sees them.",
            hint="Set LOOPMEM_PROMOTION_SWEEP_INTERVAL_SECONDS < LOOPMEM_PROMOTION_SWEEP_WINDOW_SECONDS "
            "< LOOPMEM_SESSION_TTL_SECONDS.",
            id="memory.E001",
        )
    ]
