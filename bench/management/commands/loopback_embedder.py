"""loopback_embedder: serve the benchmarks' instant OpenAI-compatible embedding endpoint in the foreground."""

from __future__ import annotations

import contextlib
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from bench.loopback_embedder import DEFAULT_DIMENSIONS, MODEL, LoopbackEmbedder


class Command(BaseCommand):
    help = (
        "Serve POST /v1/embeddings on loopback, answering at once with the hashing provider's deterministic unit "
        "vectors (HTTP/1.1 keep-alive, a thread per connection). Point a tenant at it with set_tenant_provider "
        "--embedding openai --embedding-base-url <url> --embedding-model loopback-hashing --embedding-api-key x."
    )
    requires_system_checks = ()

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8765)
        parser.add_argument("--dimensions", type=int, default=DEFAULT_DIMENSIONS)
        parser.add_argument(
            "--delay-ms",
            type=float,
            default=0.0,
            help="answer each call this much later, like a remote provider (default: at once)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        server = LoopbackEmbedder(
            host=options["host"], port=options["port"], dimensions=options["dimensions"], delay_ms=options["delay_ms"]
        )
        self.stdout.write(
            f"loopback embedder on {server.url} (model {MODEL}, {options['dimensions']} dims, "
            f"{options['delay_ms']:g} ms a call); Ctrl-C stops it"
        )
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()
        server.server_close()
