from typing import Any

from loopmem.management.operator import OperatorCommand
from loopmem.secret_guard import rules


class Command(OperatorCommand):
    help = (
        "Compile the maintained secret rules (Kingfisher's, pinned in requirements/base.txt) into this data dir's "
        "cache and print their version and how many secret formats they report. After bumping the pin, run it "
        "once so the web workers start on the cache."
    )

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        info = rules.describe()
        return info, (
            f"secret rules: kingfisher-secret-scanner {info['version']}, {info['formats']} secret formats "
            f"(rule cache {info['cache']})"
        )
