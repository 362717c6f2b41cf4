"""The web process's gunicorn hooks (config/gunicorn.py), called as gunicorn calls them."""

from __future__ import annotations

import gc
import sys

from config import gunicorn


def test_a_worker_freezes_what_it_loaded_with_its_views_imported():
    gc.unfreeze()
    try:
        gunicorn.post_worker_init(worker=None)
        assert gc.get_freeze_count() > 10_000  # Django, DRF and the app: out of every later full collection's scan
        assert "memory.api" in sys.modules  # the views were imported first, so they are frozen too
    finally:
        gc.unfreeze()  # the test process goes on collecting as before
