"""The skus that have crash reports or sessions, by name, each with when it last had one: what a
dashboard offers to pick from. One index lookup a sku in each store, whatever their sizes."""

from __future__ import annotations

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from ports import CrashIndex, SessionCounters
from ports.cursors import Kind, decode_cursor, encode_cursor
from ports.limits import Sku
from ports.timeutil import Time, to_rfc3339

MAX_LIMIT = 1000
_CURSOR_KIND = Kind.SKUS


@with_config(ConfigDict(extra="forbid"))
class SkuSeen(TypedDict):
    """When the sku last had a crash (receivedAt) and a session (its minute's start), null when it
    had none within retention."""

    sku: Sku
    lastCrash: Time | None
    lastSession: Time | None


@with_config(ConfigDict(extra="forbid"))
class SkuPage(TypedDict):
    skus: list[SkuSeen]
    nextCursor: str | None


def _time(epoch_ms: int | None) -> Time | None:
    return None if epoch_ms is None else to_rfc3339(epoch_ms)


def list_skus(index: CrashIndex, counters: SessionCounters, *, limit: int = 100,
              cursor: str | None = None) -> SkuPage:
    after = decode_cursor(cursor, _CURSOR_KIND) or ""
    # each store's first limit + 1 skus hold the first limit + 1 of both together; and a sku among
    # the first `limit` missing from one store's list is not in that store (it would come earlier)
    crashes = {seen.sku: seen.last_seen for seen in index.skus(after, limit + 1)}
    sessions = {seen.sku: seen.last_seen for seen in counters.skus(after, limit + 1)}
    names = sorted(crashes.keys() | sessions.keys())
    page = names[:limit]
    return {
        "skus": [{"sku": sku, "lastCrash": _time(crashes.get(sku)), "lastSession": _time(sessions.get(sku))}
                 for sku in page],
        "nextCursor": encode_cursor(_CURSOR_KIND, page[-1]) if len(names) > limit else None,
    }
