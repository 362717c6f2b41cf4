"""Progress bars for long operator work: shown on a terminal, silent when output is not one."""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm


def progress_bar(*, total: int, desc: str, stream: Any = None) -> tqdm[Any]:
    out = stream or sys.stderr
    return tqdm(total=total, desc=desc, unit="row", file=out, disable=not out.isatty())
