"""tests.memory.test_recall_paths, run with `heavy_read` on a streaming replica."""

from tests.replica.suites import adopt

adopt("tests.memory.test_recall_paths", globals())
