"""Idempotency keys (rules 2 and 9 of docs/architecture.md): an eventId derived from (scope, key), so a client retry
is the same event, and the hash of what it carried, so a reused key with another body is told
from a retry and never replaces what was accepted first."""

from __future__ import annotations

import hashlib
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, NamedTuple, TypeVar

# Ties eventIds derived from Idempotency-Key to Blackbox, so they never collide with another uuid5 user.
_IDEMPOTENCY_NAMESPACE = uuid.UUID("0f3c1a52-8d4e-4f61-9b0e-6a7d2c5e8b13")


def new_event_id(scope: str, idempotency_key: str | None) -> str:
    """A client retry with the same Idempotency-Key in the same scope (kind and sku or board) gets
    the same eventId; without a key, a random one."""
    if idempotency_key is None:
        return str(uuid.uuid4())
    return str(uuid.uuid5(_IDEMPOTENCY_NAMESPACE, f"{scope}\x00{idempotency_key}"))


def retriable(event_id: str) -> bool:
    """Only eventIds derived from an Idempotency-Key (uuid5) can come twice from a client; random
    ones (uuid4) never do, so they are neither looked up nor stored: keyless traffic pays nothing.
    Capture writes canonical UUID strings, whose 15th character is the version (read, not parsed:
    this runs for every event on the worker's hot path)."""
    return len(event_id) == 36 and event_id[8] == event_id[13] == "-" and event_id[14] == "5"


def body_hash(event_id: str, content: bytes) -> str | None:
    """What a keyed event carried, as SHA-256 hex; None for a keyless one (it cannot be reused)."""
    return hashlib.sha256(content).hexdigest() if retriable(event_id) else None


def conflicts(first: str | None, later: str | None) -> bool:
    """A reused key with another body; an unknown hash (events from before hashes) is a retry."""
    return first is not None and later is not None and first != later


T = TypeVar("T")


class Scoped(NamedTuple, Generic[T]):
    scope: str
    event_id: str
    items: list[T]
    body_hash: str | None


def per_scope(kind: str, items: Sequence[T], scope_of: Callable[[T], str], idempotency_key: str | None,
              items_json: Callable[[list[T]], bytes]) -> Iterator[Scoped[T]]:
    """A batch's items by scope (sku or board), in first-seen order, each scope one event: its id
    from (kind, scope, key), its body hash of what it carries (`items_json`)."""
    groups: dict[str, list[T]] = defaultdict(list)
    for item in items:
        groups[scope_of(item)].append(item)
    for scope, group in groups.items():
        event_id = new_event_id(f"{kind}\x00{scope}", idempotency_key)
        yield Scoped(scope, event_id, group, body_hash(event_id, items_json(group)))
