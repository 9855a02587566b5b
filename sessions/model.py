"""Session events, as submitted and as carried on the log."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ports.limits import Identifier, PathSegment, Sku
from ports.releases import Outcome

MAX_BATCH = 500


class SessionEvent(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    sku: Sku
    kind: Literal["client", "server"]
    playerId: Identifier | None = None
    sessionId: Identifier | None = None
    # a build is asked for in a path (/v1/releases/{build}): only one a route can name is taken
    buildVersion: PathSegment | None = None
    status: Outcome | None = Field(default=None, description=(
        "how the session ended, as Sentry's session updates say it; counted as ok when left out (a session "
        "is sent once: with its outcome when it is known)"))


class SessionCount(BaseModel):
    """`count` sessions of a sku and kind: one for an event of /v1/sessions, a Sentry SDK's
    aggregate many (reporters.sentry); of a build, how they ended, and whose, when known (left out
    of the record when not, so a record of before keeps its body hash)."""

    model_config = ConfigDict(strict=True)

    sku: str
    kind: str
    count: int = Field(default=1, ge=1, le=MAX_BATCH)
    buildVersion: str | None = None
    status: Outcome | None = None
    playerId: str | None = None


class SessionEnvelope(BaseModel):
    """One record per sku of a request: the counter only needs sku and kind of each session."""

    model_config = ConfigDict(strict=True)

    eventId: str
    receivedAt: int
    sessions: list[SessionCount]
    bodyHash: str | None = None


_SESSIONS = TypeAdapter(list[SessionCount])


def sessions_json(sessions: list[SessionCount]) -> bytes:
    """What a session record carries, as the text its body hash is taken of (a count of one left
    out, as records carried it before counts)."""
    return _SESSIONS.dump_json(sessions, exclude_defaults=True)
