"""Run another module's tests here: its test functions and fixtures, underscore-named fixtures included."""

from __future__ import annotations

import importlib
from typing import Any


def adopt(module_name: str, namespace: dict[str, Any]) -> None:
    """Copy `module_name`'s module-level names (tests, fixtures, helpers) into `namespace`."""
    source = importlib.import_module(module_name)
    namespace.update({name: value for name, value in vars(source).items() if not name.startswith("__")})
