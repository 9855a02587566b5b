"""The one error the reporters' readers raise: a reason, and from it the contract's answer."""

from __future__ import annotations

from typing import Literal

from ports.errors import BlackboxError

Reason = Literal["unsupported_encoding", "too_large", "corrupt", "invalid", "unauthorized"]

# (status, code) of the contract (docs/api.md) for each reason. A body that HTTP's own encoding
# cannot undo is a request HTTP cannot read: bad_request, as the gateway answers one
_ANSWERS: dict[Reason, tuple[int, str]] = {
    "unsupported_encoding": (415, "unsupported_media_type"),
    "too_large": (413, "payload_too_large"),
    "corrupt": (400, "bad_request"),
    "invalid": (400, "invalid_field"),
    "unauthorized": (401, "unauthorized"),
}


class ReporterError(BlackboxError):
    """What a reader refuses, with `reason` for code that must tell the cases apart (a Sentry SDK
    drops an envelope on 400 and 413 but retries on 5xx). Raised as a BlackboxError, a route needs
    no mapping of its own."""

    def __init__(self, reason: Reason, message: str, field: str | None = "body") -> None:
        super().__init__(message, field)
        self.reason: Reason = reason
        self.status, self.code = _ANSWERS[reason]
