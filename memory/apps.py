from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"

    def ready(self) -> None:
        from loopmem.observability.metrics import register_state_source
        from memory import checks  # noqa: F401  (registers the system checks)
        from memory.metrics_state import memory_state

        register_state_source("memory", memory_state)
