"""How a sku's crashes are grouped, as a studio edits it: rules (frame globs to skip, and to join
with the next frame, as Socorro's signature rules), and merges of one group into another. The crash
consumer and the minidump processor group new reports by them; a reprocessing groups past ones
again, a page of reports at a time on the minidumps topic (so within a Lambda's time), each page
asking for the next. A page's writes are a function of the reports and the grouping: a page done
twice writes the same again (effectively once, rule 3 of docs/architecture.md), and nothing of a report but its
signature changes."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, with_config
from typing_extensions import TypedDict

from crashes.issues import SIGNATURE_PATTERN, CrashIssue, crash_issue
from crashes.model import ReportDocument
from crashes.signature import signature
from pipeline.topics import MINIDUMPS, publish
from ports import CrashIndex, DocumentStore, EventLog, IndexedReport, OutgoingRecord, ReportFilter, SpillStore
from ports.errors import Conflict, InvalidField, NotFound
from ports.issues import Crash, Grouping, GroupingRules, IssueStore, Merge
from ports.limits import Sku
from ports.timeutil import Time, to_rfc3339

MAX_RULES = 50
MAX_GLOB_CHARS = 200
# a change of grouping reaches the consumer's new reports within this
GROUPING_TTL_MS = 3_000
# skus whose grouping the consumer keeps: past it, it forgets them all
MAX_KNOWN = 10_000
# reports a reprocessing request regroups: their bodies (each up to 1 MiB, docs/api.md) are read at
# once, so a page stays within a Lambda's memory, and its time within a second or so
REGROUP_PAGE = 200

# fnmatch's: `*` any run of characters, `?` one, `[...]` one of a set; matched against a whole
# normalised frame, case-sensitive. No user regex: a glob cannot backtrack catastrophically
Glob = Annotated[str, StringConstraints(min_length=1, max_length=MAX_GLOB_CHARS, pattern=r"^[^\x00-\x1f\x7f]+$")]
Globs = Annotated[list[Glob], Field(max_length=MAX_RULES)]


class RulesBody(BaseModel):
    """A sku's grouping rules, replacing the ones before."""

    model_config = ConfigDict(strict=True, extra="forbid")

    skip: Annotated[Globs, Field(description="frames to drop, e.g. `std::*`, `*::operator new*`")] = []
    join: Annotated[Globs, Field(description=(
        "frames that say nothing alone (an allocator, a panic): the next frame joins theirs in one element "
        "of the signature, `malloc | Texture::Load`"))] = []


class MergeBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    into: Annotated[str, Field(pattern=SIGNATURE_PATTERN, description="the group it is counted in from now on")]


@with_config(ConfigDict(extra="forbid"))
class RulesView(TypedDict):
    sku: str
    skip: list[str]
    join: list[str]
    version: Annotated[int, Field(description="0 before any was set; each change adds one")]
    updatedAt: Time | None
    updatedBy: str | None


@with_config(ConfigDict(extra="forbid"))
class Reprocessing(TypedDict):
    sku: str
    version: Annotated[int, Field(description="of the rules the reprocessing applies (or later ones)")]


def grouping_rules(issues: IssueStore, sku: str) -> RulesView:
    return _view(sku, issues.grouping(sku).rules)


def set_rules(issues: IssueStore, sku: str, body: RulesBody, *, by: str, now: int) -> RulesView:
    # as the change made them: read again, they may be another change's made at the same moment
    return _view(sku, issues.set_rules(sku, body.skip, body.join, now, by))


def _view(sku: str, rules: GroupingRules) -> RulesView:
    ever = rules.version > 0
    return {"sku": sku, "skip": list(rules.skip), "join": list(rules.join), "version": rules.version,
            "updatedAt": to_rfc3339(rules.updated_at) if ever else None,
            "updatedBy": rules.updated_by if ever else None}


def merge_groups(issues: IssueStore, log: EventLog, spill: SpillStore, sku: str, signature: str, *,
                 body: MergeBody, by: str, now: int) -> CrashIssue:
    """Merges group `signature` into `body.into`; the reports indexed with it move by a reprocessing
    of that signature's reports alone. Merging again changes nothing."""
    made = issues.merge(sku, signature, body.into, now, by)
    if made == "into-itself":
        raise InvalidField("a group cannot be merged into itself", "into")
    if made == "no-group":
        raise NotFound(f"no crash group {signature!r} or {body.into!r} in {sku!r}")
    if made == "cycle":
        raise Conflict(f"{body.into!r} is merged into {signature!r}: merging back would make a cycle")
    if made == "merged-elsewhere":
        raise Conflict(f"{signature!r} is merged into another group already")
    assert isinstance(made, Merge)
    # asked again on a repeat too: a request lost before it reached the log is asked for now
    publish(log, spill, MINIDUMPS, [regroup_request(sku, signature=signature)])
    return crash_issue(issues, sku, signature)


def reprocess(issues: IssueStore, log: EventLog, spill: SpillStore, sku: str) -> Reprocessing:
    version = issues.grouping(sku).rules.version
    publish(log, spill, MINIDUMPS, [regroup_request(sku)])
    return {"sku": sku, "version": version}


class RegroupRequest(BaseModel):
    """A record of the minidumps topic: group a page of a sku's reports again, those after a report
    id; only those of one signature (a merge's), or all under the current rules."""

    model_config = ConfigDict(strict=True, extra="ignore")

    regroup: Sku
    afterId: Annotated[int, Field(ge=0)] = 0
    signature: Annotated[str, Field(pattern=SIGNATURE_PATTERN)] | None = None


def regroup_request(sku: str, after: int = 0, signature: str | None = None) -> OutgoingRecord:
    request = RegroupRequest(regroup=sku, afterId=after, signature=signature)
    return OutgoingRecord(request.model_dump_json(exclude_none=True, exclude_defaults=True).encode(), sku.encode())


@dataclass(frozen=True)
class Regrouped:
    moved: int
    """reports whose signature changed"""
    walk_again: list[str]
    """report keys whose signature comes from their minidump's walk, which groups them again"""
    more: OutgoingRecord | None
    """the request of the next page"""


def regroup(index: CrashIndex, documents: DocumentStore, issues: IssueStore, request: RegroupRequest, *,
            page_size: int = REGROUP_PAGE) -> Regrouped:
    sku = request.regroup
    equals = {} if request.signature is None else {"signature": request.signature}
    page = index.find(ReportFilter(sku, page_size, after_id=request.afterId, equals=equals))
    grouping = issues.grouping(sku)
    walk_again: list[str] = []
    if request.signature is not None:
        signatures = {r.report_id: grouping.group(r.entry.signature) for r in page}
    else:
        # a walked report's signature is its walk's; one awaiting its walk gets it from that walk,
        # which reads the grouping then (a signature from its trace now could overwrite the walk's)
        walk_again = [r.entry.report_key for r in page if r.entry.processing == "processed"]
        signatures = _from_traces([r for r in page if r.entry.processing not in ("processed", "pending")], documents,
                                  grouping)
    moved = {r.report_id: signatures[r.report_id] for r in page
             if r.report_id in signatures and signatures[r.report_id] != r.entry.signature}
    by_id = {r.report_id: r.entry for r in page}
    # the issues first, as the consumer does: a group the index shows has its issue
    issues.regrouped([Crash(sku, s, by_id[i].build_version, by_id[i].received_at)
                      for i, s in moved.items() if s is not None])
    index.regroup(moved)
    more = regroup_request(sku, page[-1].report_id, request.signature) if len(page) == page_size else None
    return Regrouped(len(moved), walk_again, more)


def _from_traces(reports: Sequence[IndexedReport], documents: DocumentStore,
                 grouping: Grouping) -> dict[int, str | None]:
    """Each report's signature from its stack trace as submitted; one whose body expired is left."""
    found = documents.get_many([r.entry.report_key for r in reports])
    signatures: dict[int, str | None] = {}
    for report in reports:
        raw = found.get(report.entry.report_key)
        if raw is not None:
            trace = ReportDocument.model_validate_json(raw).payload.get("stackTrace")
            signatures[report.report_id] = grouping.group(signature(trace if isinstance(trace, str) else None,
                                                                    grouping.rules))
    return signatures


class Groupings:
    """Each sku's grouping as the crash consumer reads it: again once older than GROUPING_TTL_MS,
    so that the hot path asks the store at most once a sku in that time."""

    def __init__(self, issues: IssueStore, ttl_ms: int = GROUPING_TTL_MS, max_known: int = MAX_KNOWN) -> None:
        self._issues = issues
        self._ttl_s = ttl_ms / 1000
        self._max_known = max_known
        self._read: dict[str, tuple[float, Grouping]] = {}

    def __call__(self, sku: str) -> Grouping:
        now = time.monotonic()
        found = self._read.get(sku)
        if found is None or now - found[0] >= self._ttl_s:
            if len(self._read) >= self._max_known:
                self._read.clear()
            found = self._read[sku] = (now, self._issues.grouping(sku))
        return found[1]
