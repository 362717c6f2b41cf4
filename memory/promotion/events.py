"""One structured log line per promotion stage: `memory_promotion.<event> {json}`."""

from __future__ import annotations

import json
import logging
from typing import Any

from loopmem.observability import metrics

logger = logging.getLogger("loopmem.promotion")


def emit(event: str, /, *, tenant_id: object, **fields: Any) -> None:
    """Log `memory_promotion.<event>` with its fields as JSON (and as `extra` for structured handlers)."""
    payload = {"event": f"memory_promotion.{event}", "tenant_id": str(tenant_id), **fields}
    metrics.PROMOTION_EVENTS.labels(event=event).inc()
    logger.info("memory_promotion.%s %s", event, json.dumps(payload, default=str), extra={"promotion": payload})
