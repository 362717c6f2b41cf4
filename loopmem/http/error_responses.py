"""The one renderer of errors: every non-2xx body is `{"error": {"status", "code", "message", "details"}}`."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, JsonResponse
from psycopg import errors as pg_errors
from rest_framework import exceptions as drf
from rest_framework.response import Response
from rest_framework.views import set_rollback

from loopmem.errors import (
    BadRequest,
    DatabaseTimeout,
    DatabaseUnavailable,
    DomainError,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ServerError,
    Unauthorized,
    ValidationFailed,
)

logger = logging.getLogger(__name__)

# DRF's own errors that have no domain twin keep DRF's status and get a stable code here.
_DRF_CODES: dict[type[drf.APIException], str] = {
    drf.MethodNotAllowed: "method_not_allowed",
    drf.NotAcceptable: "not_acceptable",
    drf.UnsupportedMediaType: "unsupported_media_type",
}


def error_body(status: int, code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The error envelope."""
    return {"error": {"status": status, "code": code, "message": message, "details": details or {}}}


def _validation_details(detail: Any) -> dict[str, Any]:
    if isinstance(detail, dict):
        return {field: _messages(value) for field, value in detail.items()}
    return {"non_field_errors": _messages(detail)}


def _messages(value: Any) -> Any:
    """DRF error detail → JSON: nested objects stay objects, leaves become lists of strings."""
    if isinstance(value, dict):
        return {k: _messages(v) for k, v in value.items()}
    if isinstance(value, list):
        if all(not isinstance(v, (dict, list)) for v in value):
            return [str(v) for v in value]
        return [_messages(v) for v in value]
    return [str(value)]


def as_domain_error(exc: Exception) -> DomainError | None:
    """Translate DRF/Django exceptions into domain errors; None when there is no translation."""
    if isinstance(exc, DomainError):
        return exc
    if isinstance(exc, drf.ValidationError):
        return ValidationFailed(details=_validation_details(exc.detail))
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge(details={"max_bytes": settings.DATA_UPLOAD_MAX_MEMORY_SIZE})
    if isinstance(exc, drf.ParseError):
        return BadRequest(f"Malformed request body: {exc.detail}")
    if isinstance(exc, (drf.NotAuthenticated, drf.AuthenticationFailed)):
        return Unauthorized()
    if isinstance(exc, drf.PermissionDenied):
        return Forbidden()
    if isinstance(exc, (drf.NotFound, Http404)):
        return NotFound()
    if isinstance(exc, drf.Throttled):
        return RateLimited(retry_after=int(getattr(exc, "wait", None) or 1), limit=0)
    if isinstance(exc, (OperationalError, InterfaceError)):
        return _database_error(exc)
    return None


def _database_error(exc: OperationalError | InterfaceError) -> DomainError:
    # Django wraps the driver's error; the cause says which. A cancelled statement (statement_timeout) is a
    # timeout; anything else at this level (refused, terminated by a restart, connection closed) is unavailability.
    # Logged, as an unexpected error would be: an operator wants to see these.
    if isinstance(exc.__cause__, pg_errors.QueryCanceled):
        logger.warning("database statement cancelled (statement_timeout): %s", exc)
        return DatabaseTimeout()
    logger.warning("database unavailable: %s: %s", exc.__class__.__name__, exc)
    return DatabaseUnavailable()


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER: render known errors; log and 500 everything else (never swallowed)."""
    error = as_domain_error(exc)
    if error is None and isinstance(exc, drf.APIException):
        code = _DRF_CODES.get(type(exc), str(exc.default_code))
        response = Response(error_body(exc.status_code, code, str(exc.detail)), status=exc.status_code)
        set_rollback()
        return response
    if error is None:
        logger.exception("unhandled error in %s", context.get("view").__class__.__name__, exc_info=exc)
        error = ServerError()
    response = Response(error_body(error.status, error.code, error.message, error.details), status=error.status)
    if isinstance(error, RateLimited):
        response["Retry-After"] = str(error.retry_after)
    if isinstance(error, Unauthorized):
        response["WWW-Authenticate"] = 'Bearer realm="loopmem"'
    set_rollback()
    return response


def not_found_view(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    """handler404: unknown URLs get the same envelope as every other error."""
    return JsonResponse(error_body(404, NotFound.code, NotFound.default_message), status=404)


def server_error_view(request: HttpRequest) -> JsonResponse:
    """handler500: errors raised outside DRF views (middleware, URL resolution)."""
    return JsonResponse(error_body(500, ServerError.code, ServerError.default_message), status=500)
