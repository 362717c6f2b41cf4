"""The JSON body of a request, which every write and POST read of the API expects to be an object."""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request

from loopmem.errors import ValidationFailed


def json_object(request: Request) -> dict[str, Any]:
    """The parsed body; anything but a JSON object is 422 `validation_failed`."""
    if not isinstance(request.data, dict):
        raise ValidationFailed("The request body must be a JSON object", details={"body": ["must be an object"]})
    return request.data
