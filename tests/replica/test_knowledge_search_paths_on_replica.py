"""tests.knowledge.test_search_paths, run with `heavy_read` on a streaming replica."""

from tests.replica.suites import adopt

adopt("tests.knowledge.conftest", globals())  # its fixtures are directory-scoped there
adopt("tests.knowledge.test_search_paths", globals())
