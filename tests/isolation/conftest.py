"""The live server the MCP tools call, as tests/mcp starts it (static URL set first)."""

from tests.mcp.conftest import _static_url_for_live_server, live_server

__all__ = ["_static_url_for_live_server", "live_server"]
