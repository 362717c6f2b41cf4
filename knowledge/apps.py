from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"

    def ready(self) -> None:
        from knowledge.metrics_state import knowledge_state
        from loopmem.observability.metrics import register_state_source

        register_state_source("knowledge", knowledge_state)
