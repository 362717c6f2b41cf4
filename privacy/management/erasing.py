"""How the erase commands run an erasure: counted first (a dry run), then carried out behind a progress bar whose
total is that count; `--dry-run` stops after the count."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loopmem.runtime.progress import progress_bar
from privacy.erasure import ErasureReport


def erase_counted(
    erase: Callable[..., ErasureReport], *, dry_run: bool, label: str, **args: Any
) -> tuple[dict[str, Any], str]:
    """`erase(**args)` planned, then (unless `dry_run`) run with progress; the report as JSON and as a sentence."""
    plan = erase(dry_run=True, **args)
    if dry_run:
        return plan.as_dict(), plan.describe(label)
    with progress_bar(total=plan.database_rows, desc="erasing") as bar:
        report = erase(progress=bar.update, **args)
    return report.as_dict(), report.describe(label)
