"""System checks for memory settings: start-up fails rather than run with a configuration that loses data."""

from __future__ import annotations

from typing import Any

from celery import current_app
from django.conf import settings
from django.core.checks import Error, register

from loopmem.runtime.operator_checks import SETTINGS_TAG
from loopmem.runtime.schedules import longest_gap_seconds

PROMOTION_SWEEP_TASK = "memory.tasks.promotion_sweep_task"


@register(SETTINGS_TAG)
def promotion_ttl_invariant(app_configs: Any, **kwargs: Any) -> list[Error]:
    """interval < window < ttl: a turn must outlive the window, and every window must be swept before it closes.

    The interval is read from the beat schedule that runs (config/celery.py), not from the setting alone.
    """
    entries = [e for e in current_app.conf.beat_schedule.values() if e.get("task") == PROMOTION_SWEEP_TASK]
    if not entries:
        return [
            Error(
                f"The beat schedule has no {PROMOTION_SWEEP_TASK}: session turns would expire unpromoted.",
                hint="Keep the promotion-sweep entry in config/celery.py.",
                id="memory.E002",
            )
        ]
    interval = max(longest_gap_seconds(entry["schedule"]) for entry in entries)
    window = settings.PROMOTION_SWEEP_WINDOW_SECONDS
    ttl = settings.SESSION_TTL_SECONDS
    if interval < window < ttl:
        return []
    return [
        Error(
            f"Session settings break the promotion invariant interval < window < ttl "
            f"(got interval={interval:g}s as scheduled, window={window}s, ttl={ttl}s): turns could expire before a "
            "promotion sweep sees them.",
            hint="Set LOOPMEM_PROMOTION_SWEEP_INTERVAL_SECONDS < LOOPMEM_PROMOTION_SWEEP_WINDOW_SECONDS "
            "< LOOPMEM_SESSION_TTL_SECONDS.",
            id="memory.E001",
        )
    ]


# The fusion's weights (memory.fusion): within these bounds every fused score stays in [0, 1].
_HYBRID_WEIGHT_BOUNDS = {
    "RECALL_HYBRID_SEMANTIC_WEIGHT": (0.0, 1.0),
    "RECALL_HYBRID_CONTEXT_WEIGHT": (0.0, None),
    "RECALL_HYBRID_TIME_WEIGHT": (0.0, None),
    "RECALL_HYBRID_QUESTION_SHARE": (0.0, 1.0),
}


@register(SETTINGS_TAG)
def hybrid_weights_in_range(app_configs: Any, **kwargs: Any) -> list[Error]:
    """Hybrid recall's weights within the bounds that keep its scores in [0, 1] (an agent reads them as such)."""
    errors = []
    for name, (low, high) in _HYBRID_WEIGHT_BOUNDS.items():
        value = getattr(settings, name)
        if value < low or (high is not None and value > high):
            bounds = f"[{low:g}, {high:g}]" if high is not None else f">= {low:g}"
            errors.append(
                Error(
                    f"LOOPMEM_{name} is {value:g}: hybrid recall's scores would leave [0, 1].",
                    hint=f"Set LOOPMEM_{name} {bounds}.",
                    id="memory.E003",
                )
            )
    return errors
