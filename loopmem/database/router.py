"""Which database alias a query runs on: ordinary ORM traffic on `default`, heavy reads on `heavy_read`.

`heavy_read` is the same database or a replica of it (docs/scaling.md); only an explicit `.using(HEAVY_READ_ALIAS)`
reaches it, and the scoped sessions (`loopmem.reads.scoped`) are the code that says it.
"""

from __future__ import annotations

from typing import Any

HEAVY_READ_ALIAS = "heavy_read"


class HeavyReadRouter:
    """Ordinary ORM traffic stays on `default`; only explicit `.using(HEAVY_READ_ALIAS)` reaches the alias.

    Migrations run on `default` alone: `heavy_read` is the same database or a replica of it.
    """

    def db_for_read(self, model: type, **hints: Any) -> str:
        return "default"

    def db_for_write(self, model: type, **hints: Any) -> str:
        return "default"

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None, **hints: Any) -> bool:
        return db == "default"
