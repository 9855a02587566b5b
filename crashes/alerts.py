"""Alerts on the last window's figures, once per episode: a group's **velocity** (its crash reports
per session of one build) and a build's **crash-free drop** (its crash-free sessions below the
previous build's by a margin). A periodic job (serve's, and the AWS webhooks function's) runs
`tell_alerts`; the alerts reach the webhooks that take their kind through the outbox, and each is
logged and counted (metric AlertOpened) as it is raised.

An episode opens at the first run that finds its condition true, raising one alert, and closes at
the first later run that finds it false; a new crossing after that is a new episode and alert.
Opening is atomic in the store: a row per open episode, keyed by the kind and its subject, is
inserted in the transaction that raises the alert (IssueStore.open_episode), so of two runs that
overlap (serve and another process, two Lambda invocations) one opens it and the other raises
nothing. A close removes only the episode it read (by its opening time), never a newer one, and
times its alert's close (crashes.alert_history shows it). A run that read the window before
another run told it changes no episode after that (IssueStore.told): it would undo the newer
run's close, raising a second alert for the episode, or its opening, or close what it found true."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction

from pydantic import BaseModel, Field

from crashes.releases import previous_builds
from ports.issues import Alert, AlertKind, Episode, IssueStore
from ports.releases import BuildWindow, ReleaseCounts
from ports.telemetry import ALERT_OPENED, emit, logger
from ports.timeutil import MINUTE_MS, floor_to, to_rfc3339

VELOCITY: AlertKind = "velocity"
CRASH_FREE_DROP: AlertKind = "crash-free-drop"
KINDS = (VELOCITY, CRASH_FREE_DROP)
# of a sku's builds, newest first, those a run lists to find its builds' previous ones: a game's live
# builds are its newest few, and made-up builds posted between two of them leave the older one
# without a previous (so without a drop) rather than every run reading all of them
WALKED_BUILDS = 10_000


class AlertPolicy(BaseModel):
    """e.g. BLACKBOX_ALERTS__VELOCITY_RATE=0.05: the thresholds, over the last `window_s`.

    velocity: a group's crash reports on a build ≥ `velocity_rate` x the build's sessions, with at
    least `velocity_min_events` reports (so that a build with a handful of sessions does not page).
    crash-free drop: a build's crash-free sessions ≤ the previous build's - `crash_free_margin`
    (0.02: two percentage points), each build with at least `crash_free_min_sessions` sessions.
    `look_every_s`: how often serve looks (in AWS, each run of the webhooks function).
    `watched_builds`: of each sku, the builds with the most sessions in the window that a run looks
    at. A live game has a few builds out at once; its ingest key ships in its clients, and sessions
    naming thousands of made-up builds would otherwise have every run read each of them, every
    title's alerts waiting meanwhile."""

    look_every_s: float = Field(default=10.0, ge=0.1, le=3600)
    window_s: float = Field(default=3600.0, ge=60, le=7 * 86_400)
    velocity_rate: float = Field(default=0.01, gt=0)
    velocity_min_events: int = Field(default=10, ge=1)
    crash_free_margin: float = Field(default=0.02, gt=0, le=1)
    crash_free_min_sessions: int = Field(default=100, ge=1)
    watched_builds: int = Field(default=1000, ge=1, le=100_000)


@dataclass(frozen=True)
class Crossing:
    """A condition true now: its episode's key and the alert an opening raises."""

    key: str
    kind: AlertKind
    alert_body: dict[str, object]


def episode_key(kind: str, *subject: str) -> str:
    """`kind:` and a digest of the subject (sku, build, signature: up to 256 characters, longer than
    a key may be); the alert's body names them."""
    return f"{kind}:{hashlib.blake2b(chr(0).join(subject).encode(), digest_size=16).hexdigest()}"


def _exact(value: float) -> Fraction:
    # a threshold as written (0.01 is 1/100), so that a figure exactly on it crosses it
    return Fraction(str(value))


def crossings(counters: ReleaseCounts, issues: IssueStore, policy: AlertPolicy, now_ms: int) -> list[Crossing]:
    """The conditions true over [now - window, now), from the start of its first minute: sessions are
    counted by their minute, so reports (by receivedAt) are counted over the same minutes."""
    from_ms = floor_to(now_ms - round(policy.window_s * 1000), MINUTE_MS)
    by_sku: dict[str, dict[str, BuildWindow]] = defaultdict(dict)
    # one pass: a window may hold thousands of skus
    for b in counters.window(from_ms, now_ms, policy.watched_builds):
        by_sku[b.sku][b.build] = b
    found: list[Crossing] = []
    for sku, of_sku in sorted(by_sku.items()):
        found += _velocities(issues, policy, sku, of_sku, from_ms=from_ms, to_ms=now_ms)
        # a build of fewer sessions drops from none: its previous build is not looked for
        enough = [b for b in of_sku.values() if b.sessions >= policy.crash_free_min_sessions]
        previous_of = previous_builds(counters, sku, {b.build: b.first_seen for b in enough}, most=WALKED_BUILDS)
        for build in enough:
            before = previous_of[build.build]
            previous = of_sku.get(before.build) if before is not None else None
            if previous is not None and (drop := _crash_free_drop(policy, build, previous)) is not None:
                found.append(drop)
    return found


def _velocities(issues: IssueStore, policy: AlertPolicy, sku: str, builds: dict[str, BuildWindow], *,
                from_ms: int, to_ms: int) -> list[Crossing]:
    found = []
    rate = _exact(policy.velocity_rate)
    # the builds with sessions in the window alone: a build without has no rate
    for group in issues.group_counts(sku, list(builds), from_ms, to_ms, policy.velocity_min_events):
        build = builds.get(group.build)
        # no sessions: no rate (a build whose game sends no sessions is not paged for)
        if build is None or Fraction(group.count, build.sessions) < rate:
            continue
        found.append(Crossing(episode_key(VELOCITY, sku, group.build, group.signature), VELOCITY, {
            "sku": sku, "build": group.build, "signature": group.signature, "events": group.count,
            "sessions": build.sessions, "rate": group.count / build.sessions, "threshold": policy.velocity_rate,
            "minEvents": policy.velocity_min_events, "windowS": policy.window_s,
            "text": (f"Crash group {group.signature} in {sku} build {group.build}: {group.count} crashes in "
                     f"{build.sessions} sessions over the last {policy.window_s:g} s "
                     f"({group.count / build.sessions:.2%}, threshold {policy.velocity_rate:.2%})"),
        }))
    return found


def _crash_free_drop(policy: AlertPolicy, build: BuildWindow, previous: BuildWindow) -> Crossing | None:
    least = policy.crash_free_min_sessions
    if build.sessions < least or previous.sessions < least:
        return None
    # crash-free b ≤ crash-free p - margin, i.e. crashed share b - crashed share p ≥ margin
    if Fraction(build.crashed, build.sessions) - Fraction(previous.crashed, previous.sessions) < _exact(
            policy.crash_free_margin):
        return None
    free, was = 1 - build.crashed / build.sessions, 1 - previous.crashed / previous.sessions
    return Crossing(episode_key(CRASH_FREE_DROP, build.sku, build.build), CRASH_FREE_DROP, {
        "sku": build.sku, "build": build.build, "previousBuild": previous.build, "crashFreeSessions": free,
        "previousCrashFreeSessions": was, "sessions": build.sessions, "previousSessions": previous.sessions,
        "margin": policy.crash_free_margin, "minSessions": least, "windowS": policy.window_s,
        "text": (f"Build {build.build} of {build.sku}: {free:.2%} crash-free sessions over the last "
                 f"{policy.window_s:g} s, {was:.2%} on {previous.build} (margin "
                 f"{policy.crash_free_margin * 100:g} points)"),
    })


def tell_alerts(counters: ReleaseCounts, issues: IssueStore, policy: AlertPolicy, now_ms: int) -> int:
    """Closes the episodes whose condition is false now, opens those whose is true (raising their
    alerts); how many alerts were raised."""
    true_now = {c.key: c for c in crossings(counters, issues, policy, now_ms)}
    if not issues.told(now_ms):  # a run that read the window later is telling it
        return 0
    for kind in KINDS:
        for episode in issues.episodes(kind):
            if true_now.pop(episode.key, None) is None:
                issues.close_episode(episode, now_ms)
    raised = 0
    for key, crossing in true_now.items():
        body = {"kind": crossing.kind, **crossing.alert_body, "openedAt": to_rfc3339(now_ms)}
        episode = Episode(key, crossing.kind, now_ms)
        if issues.open_episode(episode, Alert(episode.alert_key, crossing.kind, now_ms, body)):
            # besides the webhooks: the log line and the metric an alarm can watch, as a crash spike's
            logger.warning(crossing.kind, extra={"alert": body})
            emit(ALERT_OPENED, 1, kind=crossing.kind, sku=str(body["sku"]))
            raised += 1
    return raised
