from django.apps import AppConfig


class LoopmemConfig(AppConfig):
    name = "loopmem"
    verbose_name = "loopmem core"

    def ready(self) -> None:
        from loopmem import schema  # noqa: F401  (registers the OpenAPI auth extension)
