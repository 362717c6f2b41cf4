"""tests.recall.test_api_recall, run with `heavy_read` on a streaming replica."""

from tests.replica.suites import adopt

adopt("tests.recall.test_api_recall", globals())
