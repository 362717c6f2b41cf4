"""JSON lines for production logs: one object a line, a fixed set of fields, nothing taken from the request.

Only named fields are written: the message (which our code builds from ids and tags, never from memory text or
keys), where it came from, the request id, and the exception's type and traceback. Extras attached to a record
(Django attaches the whole request to `django.request` records, with its Authorization header) are not
serialised, except a short allow-list of structured fields our own loggers set.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

# Structured extras our own loggers attach (memory.promotion.events: `promotion`); anything else is dropped.
_ALLOWED_EXTRAS = ("promotion", "task_name", "task_id")


class JsonFormatter(logging.Formatter):
    """`{"ts", "level", "logger", "message", "request_id", ...}` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or "-",
            "process": record.process,
        }
        for name in _ALLOWED_EXTRAS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exc_type"] = record.exc_info[0].__name__ if record.exc_info[0] else None
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)
