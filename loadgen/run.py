"""`blackbox load`: an open-loop load generator. Send times are fixed by the profile before the run,
so a slow server cannot slow the offered load (latency counts from when a request was due, not
from when it got out: no coordinated omission). A request the server sheds (429 or 503 with
Retry-After) is sent again once that time has passed (backing off further at each try), with the
same Idempotency-Key, as a client should. At the end it checks that every accepted crash became
queryable exactly once and that counters and the board hold every accepted event."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import uvloop
from rich.console import Console
from rich.live import Live
from rich.table import Table

from loadgen import payloads
from loadgen.http import Client
from loadgen.memory import MemoryWatch, flatness
from loadgen.profiles import PROFILES, arrivals
from loadgen.stats import percentile
from ports.errors import UserError
from ports.timeutil import now_ms, parse_time

KINDS = ("crashes", "sessions", "scores")
CRASH_POOL = 64  # distinct crash bodies, made once: building 100 KB per request would load the client
VERIFY_INTERVAL_S = 0.5
REQUEST_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class LoadConfig:
    url: str
    profile: str = "steady"
    rate: float = 50.0
    duration_s: float = 30.0
    crash_kb: int = 100
    mix: tuple[float, float, float] = (0.2, 0.6, 0.2)
    """Shares of crash, session and score requests."""
    batch: int = 10
    """Session events and scores per request."""
    api_key: str | None = None
    read_key: str | None = None
    seed: int = 1
    max_in_flight: int = 2_000
    """Requests on the wire at once, each on a connection of its own as a fleet of clients would
    send them (a shared pool would queue them in the client, out of the server's sight); one
    waiting to retry is not on the wire."""
    max_tries: int = 5
    """Tries of a request the server sheds, the first included."""
    verify_timeout_s: float = 120.0
    watch_pid: int | None = None
    """A server process whose memory (with its descendants') is sampled through the run."""


@dataclass
class Outcome:
    kind: str
    due: float
    status: int | str
    latency_ms: float
    """Of the last try, from when it was due: what the server took (and the client's own queue)."""
    answer: Any = None
    players: tuple[str, ...] = ()
    """For accepted scores: the players they were for."""
    shed_ms: tuple[float, ...] = ()
    """The latency of each answer that shed it (429/503 with Retry-After), from when that try was due."""
    total_ms: float = 0.0
    """From when the request was first due to its last answer, the waits before retries included."""
    lags_ms: tuple[float, ...] = ()
    """For each try, from when it was due to when its task ran: the client's own lag, which that
    try's latency holds (on cores shared with the server, the client falling behind)."""


FREEZE_EVERY = 5_000


@dataclass
class Tally:
    """The outcomes as they come, and the counts the live display shows, kept as they grow: it is
    redrawn twice a second on the event loop that times the requests, so it must not walk the run."""

    outcomes: list[Outcome] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    shed: int = 0
    """Answers that shed a request (429/503), over every try."""

    def add(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        self.statuses[str(outcome.status)] += 1
        self.shed += len(outcome.shed_ms)
        if len(self.outcomes) % FREEZE_EVERY == 0:
            # what the run keeps leaves the collector's view: a full collection walks every tracked
            # object, and over 200,000 outcomes stalled the event loop that times requests 250 ms.
            # Young garbage is collected first; cycles of what is in flight now wait for release()
            gc.collect(1)
            gc.freeze()

    def release(self) -> None:
        """Gives the outcomes back to the collector, once the run no longer times anything."""
        gc.unfreeze()


@dataclass
class Verification:
    crashes_accepted: int = 0
    crashes_found: int = 0
    crashes_lost: int = 0
    crashes_duplicated: int = 0
    sessions_accepted: int = 0
    sessions_counted: int = 0
    players_accepted: int = 0
    players_ranked: int = 0
    visibility: list[tuple[int, int]] = field(default_factory=list)
    """(receivedAt, submitTime - receivedAt) of each accepted crash found, in ms."""

    @property
    def lost(self) -> int:
        return (self.crashes_lost + max(0, self.sessions_accepted - self.sessions_counted)
                + max(0, self.players_accepted - self.players_ranked))


@dataclass
class LoadReport:
    config: LoadConfig
    run_id: str
    started_ms: int
    """Wall-clock time the first request was due."""
    elapsed_s: float
    outcomes: list[Outcome]
    verification: Verification
    client_overflow: int
    memory: list[tuple[float, int]] = field(default_factory=list)
    """(seconds from the start, bytes) of the watched server, through the run and its check."""
    memory_by_process: dict[int, list[tuple[float, int]]] = field(default_factory=dict)
    """The same, for each of its processes."""

    def statuses(self) -> dict[str, dict[str, int]]:
        return {kind: dict(Counter(str(o.status) for o in self.outcomes if o.kind == kind)) for kind in KINDS}

    def refused(self) -> dict[str, dict[str, int]]:
        """The kinds of request whose every answer was a refusal (a 4xx other than 408 and 429, which
        are the server's load): the key, most likely, so the run measured nothing of that kind and
        lost = 0 says nothing about it."""
        return {kind: statuses for kind, statuses in self.statuses().items()
                if statuses and all(status.isdigit() and 400 <= int(status) < 500 and status not in ("408", "429")
                                    for status in statuses)}

    def latency(self, kind: str | None = None) -> dict[str, float]:
        samples = [o.latency_ms for o in self.outcomes if kind in (None, o.kind) and o.status == 202]
        return _percentiles(samples)

    def shed(self) -> dict[str, Any]:
        """Answers that shed a request, how many requests they were to, and how many of those were
        still shed at their last try; the latency of those answers."""
        shed = [o for o in self.outcomes if o.shed_ms]
        return {"answers": sum(len(o.shed_ms) for o in shed), "requests": len(shed),
                "gaveUp": sum(1 for o in shed if o.status != 202),
                "latencyMs": _percentiles([ms for o in shed for ms in o.shed_ms]),
                "acceptedAfterRetriesMs": _percentiles([o.total_ms for o in shed if o.status == 202])}

    def throughput_per_second(self) -> list[int]:
        """Acknowledged requests per second of the run (by when they were due)."""
        per_second = Counter(int(o.due) for o in self.outcomes if o.status == 202)
        return [per_second.get(s, 0) for s in range(int(self.config.duration_s) + 1)]

    def as_json(self) -> dict[str, Any]:
        v = self.verification
        return {
            "runId": self.run_id, "profile": self.config.profile, "baseRate": self.config.rate,
            "durationS": self.config.duration_s, "elapsedS": round(self.elapsed_s, 3),
            "requests": len(self.outcomes), "clientOverflow": self.client_overflow,
            "throughput": round(sum(1 for o in self.outcomes if o.status == 202) / self.config.duration_s, 1),
            "statuses": self.statuses(),
            "requestLatencyMs": {kind: self.latency(kind) for kind in KINDS} | {"all": self.latency()},
            "shed": self.shed(),
            "clientLagMs": _percentiles([ms for o in self.outcomes for ms in o.lags_ms]),
            "visibilityLatencyMs": _percentiles([float(ms) for _, ms in v.visibility]),
            "lost": v.lost, "duplicated": v.crashes_duplicated,
            "crashes": {"accepted": v.crashes_accepted, "found": v.crashes_found, "lost": v.crashes_lost},
            "sessions": {"accepted": v.sessions_accepted, "counted": v.sessions_counted},
            "scores": {"players": v.players_accepted, "ranked": v.players_ranked},
            "throughputPerSecond": self.throughput_per_second(),
            "p99LatencyMsPer10s": self.p99_per_window(),
        } | ({"serverMemory": self._flatness(self.memory)
              | {"checkPeakMB": round(max((b for t, b in self.memory if t > self.config.duration_s), default=0)
                                      / 2**20, 1)}
              | {"byProcess": {str(pid): self._flatness(samples) for pid, samples in self.memory_by_process.items()}}
              | {"samples": [[round(t, 1), rss] for t, rss in self.memory]}} if self.memory else {})

    def _flatness(self, samples: list[tuple[float, int]]) -> dict[str, float | bool]:
        """Judged on the load itself: the check after it reads every report back, a burst of its own."""
        return flatness([(t, b) for t, b in samples if t <= self.config.duration_s], self.config.duration_s)

    def p99_per_window(self, window_s: int = 10) -> list[float | None]:
        """The p99 latency of the accepted requests due in each `window_s` of the run."""
        windows: dict[int, list[float]] = {}
        for o in self.outcomes:
            if o.status == 202:
                windows.setdefault(int(o.due // window_s), []).append(o.latency_ms)
        return [round(percentile(windows[w], 99), 1) if w in windows else None
                for w in range(int(self.config.duration_s // window_s) + 1)]

    def as_text(self) -> str:
        j = self.as_json()
        lines = [
            f"run {self.run_id}: profile {self.config.profile}, base {self.config.rate:g} req/s for "
            f"{self.config.duration_s:g} s; {j['requests']} requests, {j['throughput']} acknowledged/s",
            "statuses: " + "; ".join(f"{k} {v}" for k, v in j["statuses"].items()),
            "accepted, ms from the last try (p50 / p95 / p99): " + "; ".join(
                f"{k} {_fmt(v)}" for k, v in j["requestLatencyMs"].items()),
            f"shed (429/503 with Retry-After): {j['shed']['answers']} answers to {j['shed']['requests']} requests, "
            f"{j['shed']['gaveUp']} still shed after {self.config.max_tries} tries; ms (p50 / p95 / p99) to a shed "
            f"answer {_fmt(j['shed']['latencyMs'])}, to acceptance after retries "
            f"{_fmt(j['shed']['acceptedAfterRetriesMs'])}",
            f"the client's own lag, ms from when a try was due to when it ran (p50 / p95 / p99; each try's "
            f"latency above holds it): {_fmt(j['clientLagMs'])}",
            f"end-to-end visibility ms (p50 / p95 / p99): {_fmt(j['visibilityLatencyMs'])}",
            f"crashes accepted {j['crashes']['accepted']}, queryable {j['crashes']['found']}, "
            f"duplicated {j['duplicated']}; sessions accepted {j['sessions']['accepted']}, counted "
            f"{j['sessions']['counted']}; players {j['scores']['players']}, ranked {j['scores']['ranked']}",
            f"lost = {j['lost']}" + (f"; {self.client_overflow} not sent (client over {self.config.max_in_flight} "
                                      "in flight)" if self.client_overflow else ""),
        ]
        if memory := j.get("serverMemory"):
            lines.append(f"server memory (PSS, MB): {memory['levelMB']:g} after the warm-up ({memory['warmUpS']:g} s), "
                         f"peak {memory['peakAfterMB']:g} after it, {memory['atEndMB']:g} at the end: "
                         + ("flat" if memory["flat"] else f"grew {memory['growth']:.0%}"))
        return "\n".join(lines)


def _percentiles(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"count": 0}
    return {"count": len(samples), "mean": round(sum(samples) / len(samples), 1),
            **{f"p{p}": round(percentile(samples, p), 1) for p in (50, 95, 99)}}


def _fmt(p: dict[str, float]) -> str:
    return "n/a" if not p.get("count") else f"{p['p50']:g} / {p['p95']:g} / {p['p99']:g}"


class _Requests:
    """The request for each arrival: kind by the mix, bodies from the seed."""

    def __init__(self, config: LoadConfig, sku: str, board: str) -> None:
        self._rng = random.Random(config.seed)
        sizes = payloads.CrashSizes(config.crash_kb * payloads.KB)
        self._crashes = [json.dumps(payloads.crash(self._rng, sku, sizes.draw(self._rng))).encode()
                         for _ in range(CRASH_POOL)]
        self._config, self._sku, self._board = config, sku, board

    def next(self) -> tuple[str, str, bytes]:
        kind = self._rng.choices(KINDS, weights=self._config.mix)[0]
        if kind == "crashes":
            return kind, "/v1/crashes", self._rng.choice(self._crashes)
        if kind == "sessions":
            body: Any = payloads.sessions(self._rng, self._sku, self._config.batch)
            return kind, "/v1/sessions", json.dumps(body).encode()
        body = payloads.scores(self._rng, self._board, self._config.batch, players=100_000)
        return kind, "/v1/scores", json.dumps(body).encode()


def retry_after_s(status: int | str, headers: Mapping[str, str]) -> float | None:
    """How long the server asked to wait before the request is sent again; None if it did not shed
    it. Retry-After is seconds or an HTTP date (RFC 9110 §10.2.3); `headers` by lower-case name."""
    value = headers.get("retry-after")
    if status not in (429, 503) or value is None:
        return None
    if value.strip().isdigit():
        return float(value)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


async def _send_all(config: LoadConfig, requests: _Requests, on_outcome: Callable[[Outcome], None]) -> int:
    """Fires every arrival on time; returns how many were not sent because too many were in flight."""
    headers = {"content-type": "application/json"} | ({"x-api-key": config.api_key} if config.api_key else {})
    overflow = 0
    on_wire = 0
    in_flight: set[asyncio.Task[None]] = set()
    client = Client(config.url, headers, limit=config.max_in_flight, timeout_s=REQUEST_TIMEOUT_S)

    async def attempt(path: str, body: bytes, key: str) -> tuple[int | str, Any, float | None]:
        nonlocal on_wire
        on_wire += 1
        try:
            answer = await client.post(path, body, {"Idempotency-Key": key})
        except (OSError, TimeoutError) as exc:
            return type(exc).__name__, None, None
        finally:
            on_wire -= 1
        wait = retry_after_s(answer.status, answer.headers)
        return answer.status, json.loads(answer.body) if answer.status == 202 else None, wait

    async def one(kind: str, path: str, body: bytes, due: float, start: float) -> None:
        key = uuid.uuid4().hex  # kept across tries: a retry can never make a second event
        shed: list[float] = []
        lags: list[float] = []
        tried = due  # each try from when it was due, so its latency holds the client's lag too
        for tries in range(1, config.max_tries + 1):
            lags.append(max(0.0, (time.perf_counter() - start - tried) * 1000))
            status, answer, wait = await attempt(path, body, key)
            if wait is None:
                break
            shed.append((time.perf_counter() - start - tried) * 1000)
            if tries < config.max_tries:
                # no sooner than asked, longer each time (a server still shedding is still
                # overloaded, and retries add to its load), and spread out: clients all told
                # "1 s" at once must not all come back in the same instant
                pause = wait * 2 ** (tries - 1) * (1 + random.random())
                tried = time.perf_counter() - start + pause
                await asyncio.sleep(pause)
        now = time.perf_counter() - start
        players = tuple(s["playerId"] for s in json.loads(body)) if kind == "scores" and status == 202 else ()
        on_outcome(Outcome(kind, due, status, (now - tried) * 1000, answer, players, tuple(shed),
                           total_ms=(now - due) * 1000, lags_ms=tuple(lags)))

    start = time.perf_counter()
    for due in arrivals(PROFILES[config.profile], config.rate, config.duration_s):
        delay = start + due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        kind, path, body = requests.next()
        if on_wire >= config.max_in_flight:
            overflow += 1
            continue
        task = asyncio.create_task(one(kind, path, body, due, start))
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)
    await asyncio.gather(*in_flight)
    client.close()
    return overflow


def verify(config: LoadConfig, sku: str, board: str, outcomes: list[Outcome], console: Console) -> Verification:
    """Waits (up to verify_timeout_s) until everything accepted is visible, then counts; meanwhile
    the counts so far and the time left."""
    accepted = [o for o in outcomes if o.status == 202]
    crash_ids = {o.answer["eventId"] for o in accepted if o.kind == "crashes"}
    sessions = sum(o.answer["accepted"] for o in accepted if o.kind == "sessions")
    players = {p for o in accepted for p in o.players}
    v = Verification(crashes_accepted=len(crash_ids), sessions_accepted=sessions, players_accepted=len(players))
    deadline = time.monotonic() + config.verify_timeout_s
    what = "checking that everything accepted is queryable"
    # a line of its own: the spinner below may be redrawn before it ever shows its first text
    console.print(f"{what}; gives up in {config.verify_timeout_s:.0f} s", highlight=False)
    with _reader(config) as client, console.status(what) as status:
        while True:
            reports = _all_reports(client, sku)
            seen = Counter(r["eventId"] for r in reports)
            stats = _read(client, "/v1/stats", {"sku": sku, "granularity": "hour",
                                                "from": int(time.time() * 1000) - 2 * 3_600_000})
            counted = sum(b["sessions"] for b in stats["series"])
            ranked = (_read(client, f"/v1/leaderboards/{board}") or {"players": 0})["players"]
            found = len(crash_ids & set(seen))
            left = deadline - time.monotonic()
            if (found == len(crash_ids) and counted >= sessions and ranked >= len(players)) or left <= 0:
                break
            status.update(f"{what}: crashes {found}/{len(crash_ids)}, sessions {counted}/{sessions}, players "
                          f"{ranked}/{len(players)}; gives up in {left:.0f} s")
            time.sleep(VERIFY_INTERVAL_S)
    v.crashes_found = found
    v.crashes_lost = len(crash_ids) - found
    v.crashes_duplicated = sum(n - 1 for n in seen.values() if n > 1)
    v.sessions_counted, v.players_ranked = counted, ranked
    times = [(parse_time(r["receivedAt"], "receivedAt"), parse_time(r["submitTime"], "submitTime"))
             for r in reports if r["eventId"] in crash_ids]
    v.visibility = [(received, submitted - received) for received, submitted in times]
    return v


def _reader(config: LoadConfig) -> httpx.Client:
    return httpx.Client(base_url=config.url, timeout=60,
                        headers={"x-api-key": config.read_key} if config.read_key else {})


def _read(client: httpx.Client, path: str, params: dict[str, Any] | None = None) -> Any:
    """The answer's JSON, None for a 404; a refusal says which key is missing."""
    answer = client.get(path, params=params)
    if answer.status_code in (401, 403):
        raise UserError(f"{client.base_url} refused to let the load's check read ({answer.status_code})",
                        "pass --read-key with a key of the read role (and --api-key with a server key)")
    if answer.status_code == 404:
        return None
    answer.raise_for_status()
    return answer.json()


def _all_reports(client: httpx.Client, sku: str) -> list[dict[str, Any]]:
    reports: list[dict[str, Any]] = []
    params: dict[str, Any] = {"sku": sku, "limit": 1000}
    while True:
        page = _read(client, "/v1/crashes", params)
        reports += page["reports"]
        if page["nextCursor"] is None:
            return reports
        params["cursor"] = page["nextCursor"]


def _preflight(config: LoadConfig, sku: str) -> None:
    """Before the run: something answers at the URL, and lets the final check read."""
    with _reader(config) as client:
        try:
            page = _read(client, "/v1/crashes", {"sku": sku, "limit": 1})
        except httpx.TransportError as exc:
            raise UserError(f"nothing answers at {config.url} ({type(exc).__name__})",
                            "start it with blackbox serve (or make serve), or pass --url") from None
        except (httpx.HTTPStatusError, ValueError):  # an error status, or no JSON
            page = None
        # a sku's page of reports, empty as this run's new sku has none: else the check could not read it
        if not isinstance(page, dict) or not isinstance(page.get("reports"), list):
            raise UserError(f"{config.url} does not answer as Blackbox does (GET /v1/crashes)",
                            "pass --url with the address of a blackbox serve or deployment")


def run(config: LoadConfig, console: Console | None = None) -> LoadReport:
    run_id = uuid.uuid4().hex[:8]
    sku, board = f"load-{run_id}:pc", f"load-{run_id}"
    requests = _Requests(config, sku, board)
    tally = Tally()
    live_console = console or Console(stderr=True)

    _preflight(config, sku)
    watch = MemoryWatch(config.watch_pid) if config.watch_pid else contextlib.nullcontext()
    with watch:
        started, started_ms = time.perf_counter(), now_ms()
        try:
            overflow = _send_with_display(config, requests, tally, live_console, started)
        finally:
            tally.release()
        elapsed = time.perf_counter() - started
        live_console.print(f"sent for {elapsed:.1f} s")
        verification = verify(config, sku, board, tally.outcomes, live_console)
    watched = watch if isinstance(watch, MemoryWatch) else None
    return LoadReport(config, run_id, started_ms, elapsed, tally.outcomes, verification, overflow,
                      watched.samples if watched else [], watched.processes if watched else {})


def _send_with_display(config: LoadConfig, requests: _Requests, tally: Tally, live_console: Console,
                       started: float) -> int:
    with Live(_progress(config, tally, started), console=live_console, refresh_per_second=2,
              transient=True) as live:
        async def with_display() -> int:
            sender = asyncio.ensure_future(_send_all(config, requests, tally.add))
            while not sender.done():
                live.update(_progress(config, tally, started))
                await asyncio.sleep(0.5)
            return await sender

        return uvloop.run(with_display())


def _progress(config: LoadConfig, tally: Tally, started: float) -> Table:
    elapsed = time.perf_counter() - started
    latest = tally.outcomes[-2000:]
    recent = [o for o in latest if o.status == 202]
    table = Table(title=f"blackbox load: {config.profile} at {config.rate:g} req/s", show_header=False)
    table.add_row("elapsed", f"{elapsed:.0f} / {config.duration_s:g} s")
    offered = PROFILES[config.profile].rate_at(config.rate, config.duration_s, elapsed)
    table.add_row("offered now", f"{offered:.0f} req/s")
    table.add_row("answered", str(len(tally.outcomes)))
    table.add_row("statuses", ", ".join(f"{k}: {n}" for k, n in tally.statuses.items()))
    shed = [ms for o in latest for ms in o.shed_ms]
    table.add_row("shed (429/503, retried)", f"{tally.shed} answers"
                  + (f"; p95 {percentile(shed, 95):.0f} ms (recent)" if shed else ""))
    table.add_row("p95 latency (recent)",
                  f"{percentile([o.latency_ms for o in recent], 95):.0f} ms" if recent else "-")
    return table
