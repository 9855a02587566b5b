"""Domain errors. Each carries the contract's error code and HTTP status, so handlers map them
without knowing which domain raised them (docs/api.md). And what the command line says when the
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


class Conflict(BlackboxError):
    """A request the state refuses (a tournament's limits): the same request is refused again,
    until that state changes."""

    status = 409
    code = "conflict"


class NotATournament(Conflict):
    code = "not_a_tournament"


class TournamentClosed(Conflict):
    code = "tournament_closed"


class AttemptsExhausted(Conflict):
    code = "attempts_exhausted"


class TournamentFull(Conflict):
    code = "tournament_full"


class TooManySeasons(Conflict):
    """A wipe or change of schedule that would make a board forget a season still needed: until
    then (`Retry-After`)."""

    code = "too_many_seasons"

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class IdempotencyConflict(Conflict):
    code = "idempotency_conflict"


class RequestTimeout(BlackboxError):
    status = 408
    code = "request_timeout"


class PayloadTooLarge(BlackboxError):
    status = 413
    code = "payload_too_large"


class UnsupportedMediaType(BlackboxError):
    status = 415
    code = "unsupported_media_type"


class MalformedRequest(BlackboxError):
    """A request HTTP itself cannot read (a Content-Length that is no number, say), answered by the
    gateway before any route, as API Gateway answers its own."""

    status = 400
    code = "bad_request"


class UnsupportedCoding(BlackboxError):
    """A transfer coding HTTP allows but this server does not decode (RFC 9112 §6.1)."""

    status = 501
    code = "not_implemented"


class HeadersTooLarge(BlackboxError):
    status = 431
    code = "headers_too_large"


class Unavailable(BlackboxError):
    """A dependency (log, store) did not answer; the client may retry."""

    status = 503
    code = "unavailable"


class Busy(Unavailable):
    """This process does as many of these at once as its memory holds; soon another may."""

    retry_after_s = 5


class StoreUnavailable(Unavailable):
    """What an adapter raises when its engine did not answer (refused the connection, timed out,
    lost it, was busy or locked): the same request may succeed later. The engine's own error is its
    `__cause__`, for the log; the client is told which port, not the engine's words."""

    def __init__(self, port: str) -> None:
        super().__init__(f"the {port} store did not answer; try again")
        self.port = port


class BansLifted(Exception):
    """A ranking batch would write a record hidden whose player's ban was lifted since the batch
    read the ban list: not the records' fault, so the batch is tried again whole (pipeline.failures),
    and reads the list anew."""


class ValueRefused(ValueError):
    """What an adapter raises when its engine refused a value (too long, out of range, a broken
    constraint): the same value fails again, whenever it is tried. Not a client's error at the HTTP
    edge, where values are checked before they reach a store: there it is a bug, a 500."""


class UserError(Exception):
    """A mistake with a known fix (a missing file, a taken port, an engine not started): `blackbox`
    prints it as one line, the problem then the fix, and exits 2 as argparse does for a bad option.
    The traceback is shown only with --debug."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem}; {fix}")
