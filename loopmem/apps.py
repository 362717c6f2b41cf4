from django.apps import AppConfig


class LoopmemConfig(AppConfig):
    name = "loopmem"
    verbose_name = "loopmem core"

    def ready(self) -> None:
        # Nothing heavy here: every management command pays for what ready() imports. The OpenAPI auth
        # extension (drf-spectacular, ~0.3 s of imports) is registered by config.urls, next to the schema view.
        from loopmem.database.timeouts import install_heavy_read_statement_timeout
        from loopmem.http.metrics_scrape import redis_state
        from loopmem.observability.metrics import register_state_source

        register_state_source("redis", redis_state)
        # Every process (web, worker, commands): the heavy-read alias's statement timeout is its connection's own.
        install_heavy_read_statement_timeout()
