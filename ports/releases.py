"""Release health: sessions per sku, build, minute and outcome, the builds of a sku, and the distinct
players of a build per UTC day (all of them, and those who had a crashed session). The session
counter writes them in the transaction that stores its offsets (ports.SessionCounters.apply)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

Outcome = Literal["ok", "crashed", "abnormal", "errored"]
OUTCOMES: tuple[Outcome, ...] = ("ok", "crashed", "abnormal", "errored")
DAY_MS = 86_400_000
# a build's players of a day are kept by id up to this many (of each kind), exactly; beyond, as a
# HyperLogLog sketch (SKETCH_BITS) that the ids then kept are folded into
EXACT_PLAYERS = 1000
SKETCH_BITS = 12
SKETCH_REGISTERS = 1 << SKETCH_BITS
# HyperLogLog's standard error with 2^12 registers, 1.04/sqrt(m): 1.6%
SKETCH_ERROR = 1.04 / math.sqrt(SKETCH_REGISTERS)


@dataclass(frozen=True)
class ReleaseBucket:
    sku: str
    build: str
    minute: int
    status: Outcome


@dataclass(frozen=True)
class PlayerDay:
    """The players of a build on a UTC day (`day`: its start), or (crashed) those of them who had a
    crashed session."""

    sku: str
    build: str
    day: int
    crashed: bool


@dataclass(frozen=True)
class ReleaseIncrements:
    sessions: Mapping[ReleaseBucket, int] = field(default_factory=dict)
    players: Mapping[PlayerDay, frozenset[str]] = field(default_factory=dict)


NO_RELEASES = ReleaseIncrements()


@dataclass(frozen=True)
class BuildSeen:
    """A build of a sku, with the first and last minute it had a session in."""

    build: str
    first_seen: int
    last_seen: int


@dataclass(frozen=True)
class BuildWindow:
    """A build's sessions over a window: all of them, and the crashed."""

    sku: str
    build: str
    first_seen: int
    sessions: int
    crashed: int


class ReleaseCounts(Protocol):
    def builds(self, sku: str, before: tuple[int, str] | None, limit: int) -> list[BuildSeen]:
        """The sku's builds, newest first by (first_seen, build), those before `before` only."""
        ...

    def build(self, sku: str, build: str) -> BuildSeen | None: ...

    def release_sessions(self, sku: str, build: str, from_ms: int, to_ms: int,
                         bucket_ms: int) -> dict[int, dict[Outcome, int]]:
        """The build's sessions by bucket start and outcome, of the minutes in [from_ms, to_ms)."""
        ...

    def window(self, from_ms: int, to_ms: int, per_sku: int) -> list[BuildWindow]:
        """The builds with sessions in the minutes in [from_ms, to_ms), of every sku, by sku and build:
        of each sku the `per_sku` with the most sessions there (of as many, the first by build as text)."""
        ...

    def players(self, sku: str, build: str, from_day: int, to_day: int, crashed: bool) -> int:
        """Distinct players (or, crashed, players with a crashed session) of the build over the days
        starting in [from_day, to_day): exact while each of these days holds at most EXACT_PLAYERS,
        else a HyperLogLog estimate (SKETCH_ERROR)."""
        ...


# --- HyperLogLog (Flajolet et al. 2007), estimated by Ertl's improved raw estimator (2017): unbiased
# at every count, where Flajolet's switch from linear counting to its raw estimate at 2.5 registers
# a player ran 2% high past it


def _hash(player: str) -> int:
    return int.from_bytes(hashlib.blake2b(player.encode(), digest_size=8).digest(), "big")


def sketch(players: Iterable[str], registers: bytes | None = None) -> bytes:
    """`registers` (a new sketch for None) with these players added."""
    regs = bytearray(registers or bytes(SKETCH_REGISTERS))
    rest_bits = 64 - SKETCH_BITS
    for player in players:
        h = _hash(player)
        index, rest = h >> rest_bits, h & ((1 << rest_bits) - 1)
        rank = rest_bits - rest.bit_length() + 1
        regs[index] = max(regs[index], rank)
    return bytes(regs)


def merge(sketches: Sequence[bytes]) -> bytes:
    """The sketch of the union: each register's greatest."""
    return bytes(map(max, *sketches)) if len(sketches) > 1 else sketches[0]


def estimate(registers: bytes) -> int:
    """Ertl, "New cardinality estimation algorithms for HyperLogLog sketches", algorithm 6."""
    m = SKETCH_REGISTERS
    q = 64 - SKETCH_BITS
    counts = [0] * (q + 2)
    for r in registers:
        counts[r] += 1
    z = m * _tau(1 - counts[q + 1] / m)
    for k in range(q, 0, -1):
        z = 0.5 * (z + counts[k])
    z += m * _sigma(counts[0] / m)
    return round(m * m / (2 * math.log(2) * z))


def _sigma(x: float) -> float:
    if x == 1:
        return math.inf
    y, z = 1.0, x
    while True:
        x *= x
        before, z = z, z + x * y
        y += y
        if z == before:
            return z


def _tau(x: float) -> float:
    if x in (0, 1):
        return 0.0
    y, z = 1.0, 1 - x
    while True:
        x = math.sqrt(x)
        y *= 0.5
        before, z = z, z - (1 - x) ** 2 * y
        if z == before:
            return z / 3
