from django.apps import AppConfig


class BenchConfig(AppConfig):
    """Benchmarks and the scale corpora: commands that print figures, never imported by the service."""

    name = "bench"
