"""tests.memory.test_api_recall, run with `heavy_read` on a streaming replica."""

from tests.replica.suites import adopt

adopt("tests.memory.test_api_recall", globals())
