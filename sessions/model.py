"""Session events, as submitted and as carried on the log."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter

from ports.limits import Identifier, Sku

MAX_BATCH = 500


class SessionEvent(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    sku: Sku
    kind: Literal["client", "server"]
    playerId: Identifier | None = None
    sessionId: Identifier | None = None


class SessionCount(BaseModel):
    model_config = ConfigDict(strict=True)

    sku: str
    kind: str


class SessionEnvelope(BaseModel):
    """One record per sku of a request: the counter only needs sku and kind of each session."""

    model_config = ConfigDict(strict=True)

    eventId: str
    receivedAt: int
    sessions: list[SessionCount]
    bodyHash: str | None = None


_SESSIONS = TypeAdapter(list[SessionCount])


def sessions_json(sessions: list[SessionCount]) -> bytes:
    """What a session record carries, as the text its body hash is taken of."""
    return _SESSIONS.dump_json(sessions)
