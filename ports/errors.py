"""Domain errors. Each carries the contract's error code and HTTP status, so handlers map them
without knowing which domain raised them (DESIGN §5). And what the command line says when the
person at the terminal can fix what went wrong (UserError)."""

from __future__ import annotations


class BlackboxError(Exception):
    status = 500
    code = "internal"
    retry_after_s: int | None = None
    """When set, the answer says when to try again (`Retry-After`, seconds)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def body(self) -> dict[str, str]:
        body = {"error": self.code, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        return body


class InvalidJson(BlackboxError):
    status = 400
    code = "invalid_json"


class MissingField(BlackboxError):
    status = 400
    code = "missing_field"


class InvalidField(BlackboxError):
    status = 400
    code = "invalid_field"


class Unauthorized(BlackboxError):
    status = 401
    code = "unauthorized"


class Forbidden(BlackboxError):
    status = 403
    code = "forbidden"


class NotFound(BlackboxError):
    status = 404
    code = "not_found"


class RequestTimeout(BlackboxError):
    status = 408
    code = "request_timeout"


class PayloadTooLarge(BlackboxError):
    status = 413
    code = "payload_too_large"


class UnsupportedMediaType(BlackboxError):
    status = 415
    code = "unsupported_media_type"


class HeadersTooLarge(BlackboxError):
    status = 431
    code = "headers_too_large"


class Unavailable(BlackboxError):
    """A dependency (log, store) did not answer; the client may retry."""

    status = 503
    code = "unavailable"


class UserError(Exception):
    """A mistake with a known fix (a missing file, a taken port, an engine not started): `blackbox`
    prints it as one line, the problem then the fix, and exits 2 as argparse does for a bad option.
    The traceback is shown only with --debug."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem}; {fix}")
