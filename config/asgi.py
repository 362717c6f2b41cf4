import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

application = get_asgi_application()

# After setup (settings loaded): only the processes serving HTTP get the web statement timeout.
from loopmem.database.timeouts import install_web_statement_timeout  # noqa: E402

install_web_statement_timeout()
