"""Crash groups as issues: a group's page (its state, when and by whom it was set, its history, and
its reports by build) and the change of its state a studio asks for. The crash consumer makes and
moves them (ports.issues.IssueStore.observe); regressions are told to the webhooks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator, with_config
from typing_extensions import TypedDict

from ports.errors import InvalidField, NotFound
from ports.issues import BuildReports, Change, Issue, IssueState, IssueStore, build_order
from ports.limits import MAX_ID_CHARS, Whole
from ports.timeutil import Time, parse_time, to_rfc3339

# a signature is a hex digest (crashes.signature): the path carries it as it is
SIGNATURE_PATTERN = r"^[0-9a-f]{16,64}$"
MAX_BUILDS = 100
HISTORY = 20
# how many more reports an ignore may wait for
MAX_IGNORE_REPORTS = 1_000_000_000


class StateBody(BaseModel):
    """What a studio sets: resolved (optionally in a build: only a report of that build or a later
    one regresses it), ignored (forever, until a time, or until this many more reports, whichever
    comes first), or unresolved."""

    model_config = ConfigDict(strict=True, extra="forbid")

    state: Literal["unresolved", "resolved", "ignored"]
    inBuild: Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)] | None = None
    ignoreUntil: Annotated[str, Field(description="RFC 3339 with a zone", json_schema_extra={"format": "date-time"})
                           ] | None = None
    ignoreForReports: Annotated[Whole, Field(ge=1, le=MAX_IGNORE_REPORTS)] | None = None

    @model_validator(mode="after")
    def _fits_the_state(self) -> StateBody:
        if self.inBuild is not None and self.state != "resolved":
            raise ValueError("inBuild goes with state resolved")
        if (self.ignoreUntil is not None or self.ignoreForReports is not None) and self.state != "ignored":
            raise ValueError("ignoreUntil and ignoreForReports go with state ignored")
        return self


@with_config(ConfigDict(extra="forbid"))
class StateLine(TypedDict):
    state: IssueState
    inBuild: str | None
    ignoreUntil: Time | None
    ignoreUntilReports: int | None
    changedAt: Time
    changedBy: str


@with_config(ConfigDict(extra="forbid"))
class BuildLine(TypedDict):
    build: str | None
    reports: int
    players: Annotated[int, Field(description="distinct playerIds of its reports in this build")]
    firstSeen: Time
    lastSeen: Time


@with_config(ConfigDict(extra="forbid"))
class CrashIssue(StateLine):
    sku: str
    signature: str
    mergedInto: Annotated[str | None, Field(description=(
        "the group its reports are counted in since it was merged; its state and history stay as they were"))]
    mergedAt: Time | None
    mergedBy: str | None
    regressions: int
    firstSeen: Time
    lastSeen: Time | None
    firstBuild: str | None
    reports: int
    players: Annotated[int, Field(description=(
        "players affected: distinct playerIds of its reports (a report without one counts none)"))]
    builds: list[BuildLine]
    history: list[StateLine]


def _line(issue: Issue) -> StateLine:
    return {"state": issue.state, "inBuild": issue.build,
            "ignoreUntil": None if issue.ignore_until is None else to_rfc3339(issue.ignore_until),
            "ignoreUntilReports": issue.ignore_count, "changedAt": to_rfc3339(issue.changed_at),
            "changedBy": issue.changed_by}


def _build(reports: BuildReports) -> BuildLine:
    return {"build": reports.build, "reports": reports.count, "players": reports.players,
            "firstSeen": to_rfc3339(reports.first_seen),
            "lastSeen": to_rfc3339(reports.last_seen)}


def _newest_first(builds: Sequence[BuildReports]) -> list[BuildReports]:
    # no build last
    return sorted(builds, key=lambda b: (b.build is not None, build_order(b.build or "")), reverse=True)


def crash_issue(issues: IssueStore, sku: str, signature: str) -> CrashIssue:
    issue = issues.issue(sku, signature)
    if issue is None:
        raise NotFound(f"no crash group {signature!r} in {sku!r}")
    builds = issues.reports(sku, signature)
    first = min(builds, key=lambda b: b.first_seen, default=None)
    merged = issues.merged_into(sku, signature)
    return {**_line(issue), "sku": sku, "signature": signature, "mergedInto": None if merged is None else merged.into,
            "mergedAt": None if merged is None else to_rfc3339(merged.at),
            "mergedBy": None if merged is None else merged.by, "regressions": issue.episode,
            "firstSeen": to_rfc3339(issue.first_seen),
            "lastSeen": to_rfc3339(max(b.last_seen for b in builds)) if builds else None,
            "firstBuild": first.build if first is not None else None,
            "reports": sum(b.count for b in builds), "players": issues.players(sku, signature),
            "builds": [_build(b) for b in _newest_first(builds)[:MAX_BUILDS]],
            "history": [_line(i) for i in issues.history(sku, signature, HISTORY)]}


def change_state(issues: IssueStore, sku: str, signature: str, body: StateBody, *, by: str, now: int) -> CrashIssue:
    until = None if body.ignoreUntil is None else parse_time(body.ignoreUntil, "ignoreUntil")
    if until is not None and until <= now:
        # it would end at the group's next report: shown ignored until then, and no alert held back
        raise InvalidField("ignoreUntil must be in the future", "ignoreUntil")
    change = Change(body.state, now, by, build=body.inBuild, ignore_until=until, ignore_for=body.ignoreForReports)
    if issues.change(sku, signature, change) is None:
        raise NotFound(f"no crash group {signature!r} in {sku!r}")
    return crash_issue(issues, sku, signature)
