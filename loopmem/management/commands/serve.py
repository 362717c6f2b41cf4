"""Run the whole service in the foreground: migrations, web server, Celery worker and beat.

The embedded PostgreSQL and Redis (if used) belong to this process: children are handed their URLs, a child that
dies is restarted (the embedded servers outlive it), and Ctrl-C stops the children first, then the servers.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from loopmem.runtime.supervisor import Supervisor


class Command(BaseCommand):
    help = "Run web server + Celery worker + Celery beat in the foreground (Ctrl-C stops everything)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--no-migrate", action="store_true", help="skip `migrate` before starting")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["no_migrate"]:
            call_command("migrate", interactive=False, verbosity=0)
            self.stdout.write("database migrated")
        metrics_dir = settings.DATA_DIR / "metrics"
        env = {
            **os.environ,
            "DATABASE_URL": settings.DATABASE_URL,
            "HEAVY_READ_DATABASE_URL": settings.HEAVY_READ_DATABASE_URL,
            "REDIS_URL": settings.REDIS_URL,
            "LOOPMEM_SECRET_KEY": settings.SECRET_KEY,
            "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "config.settings.base"),
        }
        bind = f"{settings.SERVE_HOST}:{settings.SERVE_PORT}"
        python = sys.executable
        commands = {
            "web": [
                python,
                "-m",
                "gunicorn",
                "-c",
                "config/gunicorn.py",
                "config.wsgi:application",
                "--bind",
                bind,
                "--workers",
                str(settings.SERVE_WEB_WORKERS),
                "--access-logfile",
                "-",
            ],
            "worker": [
                python,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "--loglevel",
                "INFO",
                "--concurrency",
                str(settings.SERVE_CELERY_CONCURRENCY),
                # One worker for every queue here; production runs a pool per queue (Procfile).
                "--queues",
                ",".join(settings.CELERY_QUEUE_NAMES),
                "--hostname",
                f"loopmem-{settings.SERVE_PORT}@%h",
            ],
            "beat": [python, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO"],
        }
        # Each process group records its metrics in its own directory (multiprocess mode).
        for name in commands:
            (metrics_dir / name).mkdir(parents=True, exist_ok=True)
        supervisor = Supervisor(
            commands=commands,
            env=env,
            child_envs={name: {"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir / name)} for name in commands},
            on_event=lambda line: self.stderr.write(line),
        )
        signal.signal(signal.SIGINT, supervisor.request_stop)
        signal.signal(signal.SIGTERM, supervisor.request_stop)
        self._announce(bind)
        # A crashed child is restarted with backoff; only Ctrl-C (or SIGTERM) stops the stack.
        supervisor.run()
        self.stdout.write("stopped")

    def _announce(self, bind: str) -> None:
        url = f"http://{bind}"
        # The same data dir, or the command starts an embedded PostgreSQL of its own on an empty database.
        manage = f"LOOPMEM_DATA_DIR={shlex.quote(str(settings.DATA_DIR))} {sys.executable} manage.py"
        self.stdout.write(
            "\n".join(
                [
                    "",
                    f"loopmem is serving on {url}  (readiness: {url}/readyz, API docs: {url}/api/docs/)",
                    f"data dir: {settings.DATA_DIR}",
                    "Create a first API key (in another terminal, same LOOPMEM_DATA_DIR):",
                    f"  {manage} create_tenant --name 'My Team' --slug my-team",
                    f"  {manage} create_api_key --tenant my-team --role agent --agent-id my-agent",
                    f"  curl -H 'Authorization: Bearer <key>' {url}/api/v1/projects",
                    "Ctrl-C stops the web server, worker, beat and the embedded servers.",
                    "",
                ]
            )
        )
