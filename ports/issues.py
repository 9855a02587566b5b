"""Crash groups as issues: each signature of a sku has a state that a studio sets (resolved,
optionally in a build; ignored, forever, until a time or until a count of reports) and that the
crash consumer moves (a new group; a resolved one that crashes again in its build or a later one
regresses), with a history. A change that needs telling raises an alert, stored once under its key
with a delivery to each webhook that takes its kind (the outbox the delivery job reads)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from ports.timeutil import to_rfc3339

IssueState = Literal["unresolved", "resolved", "ignored", "regressed"]
AlertKind = Literal["new-group", "regressed", "season-end", "velocity", "crash-free-drop"]
# season-end: a leaderboard's season is over, with its final top (ranking.season_ends);
# velocity, crash-free-drop: a group's crashes per session on a build, a build's crash-free sessions
# against the build before it, each once per episode (crashes.alerts)
ALERT_KINDS: tuple[AlertKind, ...] = ("new-group", "regressed", "season-end", "velocity", "crash-free-drop")
# the order a webhook's due deliveries are sent in (after a retry), each rank by when it is due: a
# season's end (a board's prizes) first, then a storm's signals, and last a group's alerts, which a
# storm makes by the thousand (10 a minute reach a webhook in AWS), in the order they were raised (a
# group's regression after its new group)
URGENCY: dict[AlertKind, int] = {"season-end": 0, "velocity": 1, "crash-free-drop": 1, "regressed": 2, "new-group": 2}
DeliveryStatus = Literal["pending", "delivered", "failed"]
# who changed a state when the consumer did
CONSUMER = "blackbox"


@dataclass(frozen=True)
class Crash:
    """What the issues see of a report the crash consumer indexed."""

    sku: str
    signature: str
    build: str | None
    received_at: int


@dataclass(frozen=True)
class Issue:
    sku: str
    signature: str
    state: IssueState
    build: str | None
    """resolved: the build it was resolved in (None: any later report regresses it)."""
    ignore_until: int | None
    """ignored: until this time (ms)."""
    ignore_count: int | None
    """ignored: until the group has this many reports in the index, as counted when it was set."""
    episode: int
    """how many times it regressed: an alert is once per (group, episode)."""
    first_seen: int
    changed_at: int
    changed_by: str
    ignore_for: int | None = None
    """ignored: until this many reports received after `changed_at` (None with an ignore_count: one
    set before it was kept, which counts the group's reports in the index)."""


@dataclass(frozen=True)
class Change:
    """A change of state a studio asks for."""

    state: IssueState
    at: int
    by: str
    build: str | None = None
    ignore_until: int | None = None
    ignore_for: int | None = None
    """ignored until this many more reports."""


@dataclass(frozen=True)
class GroupingRules:
    """A sku's grouping rules (crashes.signature), as Socorro's signature rules: frames matching a
    `skip` glob are dropped, and a frame matching a `join` glob takes the next one into the same
    element of the signature. Version 0: none were ever set (the default grouping)."""

    skip: tuple[str, ...] = ()
    join: tuple[str, ...] = ()
    version: int = 0
    updated_at: int = 0
    updated_by: str = CONSUMER


@dataclass(frozen=True)
class Merge:
    """Signature `signature` of a sku is counted in group `into` from `at` on."""

    signature: str
    into: str
    at: int
    by: str


@dataclass(frozen=True)
class Grouping:
    """How a sku's reports are grouped: its rules, and the merges of one signature into another.
    A merge names the group a signature ends in (merging into a merged group merges into its
    group, and the merges into a group that merges follow it), so grouping is one lookup."""

    rules: GroupingRules = GroupingRules()
    merges: Mapping[str, Merge] = field(default_factory=dict)

    def group(self, signature: str | None) -> str | None:
        merge = None if signature is None else self.merges.get(signature)
        return signature if merge is None else merge.into


MergeRefusal = Literal["no-group", "into-itself", "merged-elsewhere", "cycle"]


def merge_refusal(grouping: Grouping, signature: str, into: str, known: bool) -> MergeRefusal | None:
    """Why `signature` cannot be merged into `into` (None: it can, or was already). `known`: both
    groups have an issue. A group merges into one other only."""
    if signature == into:
        return "into-itself"
    if not known:
        return "no-group"
    target = grouping.group(into)
    if target == signature:
        return "cycle"
    made = grouping.merges.get(signature)
    return "merged-elsewhere" if made is not None and made.into != target else None


@dataclass(frozen=True)
class Alert:
    key: str
    """unique: a second alert under it is the same alert, never sent again."""
    kind: str
    created_at: int
    body: Mapping[str, Any]


@dataclass(frozen=True)
class Webhook:
    name: str
    url: str
    secret: str
    kinds: tuple[str, ...]
    updated_at: int


@dataclass(frozen=True)
class Delivery:
    webhook: str
    alert_key: str
    status: DeliveryStatus
    attempts: int
    next_attempt: int
    last_code: int | None
    last_error: str | None
    updated_at: int


@dataclass(frozen=True)
class BuildReports:
    """A group's reports in one build (None: those without a buildVersion)."""

    build: str | None
    count: int
    first_seen: int
    last_seen: int
    players: int
    """distinct playerIds among them (reports without one count none)"""


@dataclass(frozen=True)
class GroupCount:
    """A group's reports in one build over a window."""

    build: str
    signature: str
    count: int


@dataclass(frozen=True)
class Episode:
    """A condition that is true since `opened_at` (crashes.alerts): its alert was raised then, and
    no other is until a run finds it false and closes it."""

    key: str
    kind: str
    opened_at: int

    @property
    def alert_key(self) -> str:
        """Its alert's: one per opening."""
        return f"{self.key}:{self.opened_at}"


@dataclass(frozen=True)
class RaisedAlert:
    """An alert as the history shows it: when its episode closed (None while open, and for an alert
    that is no episode) and its delivery to each webhook that took its kind."""

    alert: Alert
    closed_at: int | None
    deliveries: tuple[Delivery, ...]


class IssueStore(Protocol):
    def observe(self, crashes: Sequence[Crash], now: int) -> list[Alert]:
        """Moves each crash's issue (made, unresolved, on its first), in one transaction, and stores
        the alerts that raises; returns the alerts stored now (an alert whose key is there already
        is not). Observing a crash again changes nothing: a redelivered batch is harmless. An ignore
        for a number of reports is ended by `counted`, once the reports are indexed."""
        ...

    def counted(self, crashes: Sequence[Crash]) -> None:
        """Once the crashes' reports are indexed: ends the ignore of each of their issues that waits
        for more reports of its group than the index now holds, as of the latest of its crashes.
        Counted after the write, a report counts once however often its batch is delivered, and
        whichever consumer indexes a group's reports, the last to count finds them all."""
        ...

    def change(self, sku: str, signature: str, change: Change) -> Issue | None:
        """Sets the state of an issue the consumer made, with a line of history; None if none."""
        ...

    def issue(self, sku: str, signature: str) -> Issue | None: ...

    def reports(self, sku: str, signature: str) -> list[BuildReports]:
        """The group's reports in the index (within retention), by build."""
        ...

    def players(self, sku: str, signature: str) -> int:
        """The distinct playerIds of the group's reports in the index (within retention)."""
        ...

    def history(self, sku: str, signature: str, limit: int) -> list[Issue]:
        """Its states, newest first (each as it was set)."""
        ...

    def group_counts(self, sku: str, builds: Sequence[str], from_ms: int, to_ms: int,
                     at_least: int) -> list[GroupCount]:
        """The sku's groups' reports of these builds received in [from_ms, to_ms), by build and
        signature, those with at least `at_least` only."""
        ...

    def grouping(self, sku: str) -> Grouping:
        """The sku's rules and merges (the default grouping when none were set)."""
        ...

    def merged_into(self, sku: str, signature: str) -> Merge | None:
        """The merge that counts this group in another (None: it is counted in its own): one row,
        where grouping() reads all the sku's."""
        ...

    def set_rules(self, sku: str, skip: Sequence[str], join: Sequence[str], at: int, by: str) -> GroupingRules:
        """Replaces the sku's rules; the new ones have the next version."""
        ...

    def merge(self, sku: str, signature: str, into: str, at: int, by: str) -> Merge | MergeRefusal:
        """Merges a group into another in one transaction (merge_refusal says when not): the merges
        into `signature` follow it, and the group's first_seen is the earlier of the two. Returns the
        merge (the one made before, when it was)."""
        ...

    def regrouped(self, crashes: Sequence[Crash]) -> None:
        """Reports moved to a group by a reprocessing (crashes.grouping): an issue is made for a group
        that has none, without an alert, and a group's first_seen moves to an earlier report."""
        ...

    def episodes(self, kind: str) -> list[Episode]:
        """The open episodes of a kind."""
        ...

    def open_episode(self, episode: Episode, alert: Alert) -> bool:
        """Opens the episode and raises its alert in one transaction; False (and nothing stored) when
        an episode under its key is open already, whoever opened it, or when a run that read the
        window after this one (at `opened_at`) has told it since (`told`)."""
        ...

    def told(self, at: int) -> bool:
        """A run that read the window at `at` says so before it changes episodes; False when a run
        that read it later said so (or changed an episode) first: this one's figures are older, and
        it changes nothing. A time more than 10 minutes ahead of this one's is taken for a clock far
        ahead, not a newer run, and this one's is written over it."""
        ...

    def close_episode(self, episode: Episode, at: int) -> bool:
        """Closes it if it is still the one open under its key (opened at its `opened_at`), and
        records `at` as its alert's closing; False, as open_episode, when a run that read the window
        after `at` has told it since."""
        ...

    def raise_alert(self, alert: Alert) -> bool:
        """Stores an alert and a delivery of it to each webhook taking its kind; False (and nothing
        stored) when its key is there already."""
        ...

    def alert_history(self, sku: str, from_ms: int, to_ms: int, before: tuple[int, str] | None,
                      limit: int) -> list[RaisedAlert]:
        """The sku's alerts (by the `sku` of their body) raised in [from_ms, to_ms), newest first (by
        created_at, then key), those before (created_at, key) only."""
        ...

    def raised(self, key: str) -> bool:
        """Whether an alert of this key is stored: a job can skip the work of one it raised."""
        ...

    def put_webhook(self, webhook: Webhook) -> bool:
        """True if it is new, False if it replaced one of that name."""
        ...

    def webhooks(self) -> list[Webhook]: ...

    def delete_webhook(self, name: str) -> bool:
        """And its deliveries; False if there was none."""
        ...

    def due(self, now: int, limit: int, per_webhook: int | None = None) -> list[tuple[Delivery, Alert, Webhook]]:
        """Pending deliveries whose next attempt is due, of a resting webhook none; of each
        webhook's, a retry first, then by URGENCY, each kind by when it is due, its first
        `per_webhook` at most (None: no share)."""
        ...

    def claim(self, delivery: Delivery, until: int, now: int) -> bool:
        """Moves a due delivery's next attempt to `until` if no one did since it was read: the run
        that gets True sends it."""
        ...

    def attempted(self, delivery: Delivery) -> bool:
        """Stores a delivery's outcome (its status, attempts, next attempt, last answer): that of
        its attempt numbered `attempts`; False, and left out, if another run (whose claim came after
        this one's ran out) stored that one first, unless this one delivered and that one did not;
        a delivery stored is never replaced."""
        ...

    def announce(self, key: str, at: int) -> bool:
        """Claims the announcement of `key` (a crash spike's) at `at`: True for the one caller, of
        every consumer, that claims it first, until retention purges it."""
        ...

    def purge(self, before_ms: int) -> int:
        """Drops the alerts raised before `before_ms`, their deliveries and the announcements made
        before it (retention); returns how many rows went."""
        ...

    def rest(self, webhook: str, until: int) -> None:
        """Moves the webhook's pending deliveries due before `until` to `until`: a receiver that
        failed one waits with it, instead of failing each of the others in turn."""
        ...

    def deliveries(self, webhook: str, before: tuple[int, str] | None, limit: int) -> list[tuple[Delivery, Alert]]:
        """A webhook's deliveries, last changed first, those before (updated_at, alert_key) only."""
        ...

    def close(self) -> None: ...


# --- the order of builds and the consumer's moves, pure: the stores run them in their transaction

# numbers (any script's decimal digits) and words (any script's letters: "²" too, which is no
# decimal digit however str.isdigit sees it)
_PARTS = re.compile(r"(\d+)|([^\W\d_]+)")


# the words that make a build a pre-release of the one without them (2.0.0-rc1 < 2.0.0)
PRE_RELEASE = frozenset({"dev", "pre", "preview", "alpha", "beta", "rc"})


def build_order(build: str) -> tuple[tuple[int, int | str], ...]:
    """A build's place: its runs of digits compared as numbers, of letters as text, in order
    ("1.10.0" after "1.9.2", "2.0.0-rc2" after "2.0.0-rc1"). Where two differ, a pre-release word
    sorts first, then the build's end, then other letters, then a number: "2.0.0-rc1" < "2.0.0" <
    "2.0.0-hotfix" < "2.0.0.1" (a pre-release before its release, as semver has it; a game's
    lettered hotfix after it). Punctuation only separates."""
    return (*((3, int(number)) if number else (0 if word.lower() in PRE_RELEASE else 2, word.lower())
              for number, word in _PARTS.findall(build)), (1, ""))


def at_or_after(build: str | None, resolved_in: str | None) -> bool:
    """Whether a report of `build` regresses an issue resolved in `resolved_in`: any report does when
    it was resolved in no build; one without a build does not when it was."""
    if resolved_in is None:
        return True
    return build is not None and build_order(build) >= build_order(resolved_in)


def new_issue(crash: Crash) -> Issue:
    return Issue(crash.sku, crash.signature, "unresolved", None, None, None, 0, crash.received_at,
                 crash.received_at, CONSUMER)


def moved(issue: Issue, crash: Crash, reports: int | None) -> Issue | None:
    """The issue after the consumer saw `crash` (None: unchanged). `reports`: asked for only when an
    ignore waits for a count, the group's reports received after the change and before `crash` (for
    an ignore of no `ignore_for`: in the index before `crash`). Only reports received after the last
    change move it, so seeing one again (a redelivery) never moves it twice."""
    if crash.received_at <= issue.changed_at:
        return None
    if issue.state == "resolved" and at_or_after(crash.build, issue.build):
        return replace(issue, state="regressed", episode=issue.episode + 1, changed_at=crash.received_at,
                       changed_by=CONSUMER)
    if issue.state == "ignored":
        over = (issue.ignore_until is not None and crash.received_at >= issue.ignore_until) or (
            (wanted := issue.ignore_count if issue.ignore_for is None else issue.ignore_for) is not None
            and reports is not None and reports >= wanted)
        if over:
            return replace(issue, state="unresolved", build=None, ignore_until=None, ignore_count=None, ignore_for=None,
                           changed_at=crash.received_at, changed_by=CONSUMER)
    return None


def alert_body(alert: Alert) -> dict[str, Any]:
    """The alert's body as answered and sent; an alert an earlier release stored holds its crash's
    receivedAt in epoch ms, answered in RFC 3339 as every time is."""
    body = dict(alert.body)
    if isinstance(received := body.get("receivedAt"), int):
        body["receivedAt"] = to_rfc3339(received)
    return body


def issue_alert(issue: Issue, crash: Crash) -> Alert:
    """The alert a new or regressed issue raises: one per group and episode."""
    kind: AlertKind = "new-group" if issue.episode == 0 else "regressed"
    if kind == "new-group":
        text = f"New crash group {issue.signature} in {issue.sku} (build {crash.build or 'unknown'})"
    else:
        text = (f"Crash group {issue.signature} in {issue.sku} regressed: resolved in "
                f"{issue.build or 'no build'}, crashed again in {crash.build or 'an unknown build'}")
    body = {"kind": kind, "sku": issue.sku, "signature": issue.signature, "episode": issue.episode,
            "build": crash.build, "resolvedIn": issue.build if kind == "regressed" else None,
            "receivedAt": to_rfc3339(crash.received_at), "text": text}
    return Alert(f"{kind}:{issue.sku}:{issue.signature}:{issue.episode}", kind, crash.received_at, body)
