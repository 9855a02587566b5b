"""Crash grouping (crashes.grouping) on both storages: a sku's rules and merges in the issue store,
a reprocessing's writes to the index; and random reports, rules, merges and reprocessings against a
plain model, every page of a reprocessing done twice (a redelivery): each report ends in the group a
recomputation gives, and nothing of a report but its signature changes."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from adapters.embedded.documents import SqliteDocumentStore
from adapters.embedded.log import SqliteEventLog
from crashes.grouping import MAX_GLOB_CHARS, MAX_RULES, Groupings, RegroupRequest, RulesBody, regroup, set_rules
from crashes.model import envelope_value, report_key
from crashes.persistence import persist_crashes
from pipeline.topics import CRASHES
from ports import CrashIndex, DocumentStore, EventLog, IndexEntry, LogRecord, ReportFilter
from ports.issues import Change, Crash, GroupingRules, IssueStore, Merge
from tests.at_once import at_once

SIGNATURES = ("a1a1a1a1a1a1a1a1", "b2b2b2b2b2b2b2b2", "c3c3c3c3c3c3c3c3", "d4d4d4d4d4d4d4d4")


@pytest.fixture
def others(tmp_path: Path) -> Iterator[tuple[DocumentStore, EventLog]]:
    """The documents and the log the crash consumer writes besides: the embedded ones for both."""
    documents, log = SqliteDocumentStore(tmp_path / "documents.sqlite"), SqliteEventLog(tmp_path / "log.sqlite")
    yield documents, log
    documents.close()
    log.close()


def test_rules_replace_the_ones_before_with_the_next_version(stores: tuple[CrashIndex, IssueStore]) -> None:
    _, issues = stores
    assert issues.grouping("g").rules.version == 0 and issues.grouping("g").merges == {}
    first = issues.set_rules("g", ["std::*"], ["malloc"], 1000, "key-1")
    assert (first.skip, first.join, first.version, first.updated_at, first.updated_by) == (
        ("std::*",), ("malloc",), 1, 1000, "key-1")
    second = issues.set_rules("g", [], ["operator new*", "malloc"], 2000, "server")
    assert (second.skip, second.join, second.version) == ((), ("operator new*", "malloc"), 2)
    assert issues.grouping("g").rules == second
    assert issues.grouping("h").rules.version == 0  # another sku's
    # the longest the contract takes, in characters of 4 bytes, and in ones JSON escapes
    astral = ["\U0001d49c" * MAX_GLOB_CHARS] * MAX_RULES
    escaped = [c * MAX_GLOB_CHARS for c in ("\\", '"')] * (MAX_RULES // 2)
    stored = issues.set_rules("g", astral, escaped, 3000, "server")
    assert (list(stored.skip), list(stored.join)) == (astral, escaped)


class _RulesSetAfter:
    """The issue store, with another change of a sku's rules landing just after each one made here:
    another API worker's PUT at the same moment."""

    def __init__(self, store: IssueStore) -> None:
        self._store = store

    def set_rules(self, sku: str, skip: Sequence[str], join: Sequence[str], at: int, by: str) -> GroupingRules:
        made = self._store.set_rules(sku, skip, join, at, by)
        self._store.set_rules(sku, ["another::*"], [], at + 1, "another")
        return made

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_change_of_the_rules_answers_with_the_rules_it_made(stores: tuple[CrashIndex, IssueStore]) -> None:
    """Found from outside: the answer read the rules again after the change, so of PUTs at once two
    answered the same version, one with a body its client never sent."""
    _, issues = stores
    view = set_rules(_RulesSetAfter(issues), "g", RulesBody(skip=["mine::*"]), by="key-1", now=1000)  # type: ignore[arg-type]
    assert (view["skip"], view["version"], view["updatedBy"]) == (["mine::*"], 1, "key-1")
    assert issues.grouping("g").rules.version == 2


def test_a_merge_is_made_once_follows_its_target_and_refuses_cycles(stores: tuple[CrashIndex, IssueStore]) -> None:
    _, issues = stores
    a, b, c, d = SIGNATURES
    issues.observe([Crash("g", a, "1", 3000), Crash("g", b, "1", 1000), Crash("g", c, None, 2000)], 3000)
    assert issues.merge("g", a, a, 4000, "k") == "into-itself"
    assert issues.merge("g", a, d, 4000, "k") == "no-group"  # d has no issue
    assert issues.merge("h", a, b, 4000, "k") == "no-group"  # nor a in another sku
    assert issues.merge("g", b, a, 4000, "k") == Merge(b, a, 4000, "k")
    assert issues.merge("g", b, a, 5000, "other") == Merge(b, a, 4000, "k")  # again: the first stays
    assert issues.merge("g", b, c, 5000, "k") == "merged-elsewhere"
    assert issues.merge("g", a, b, 5000, "k") == "cycle"  # b is counted in a
    # the group merged into takes the earlier first_seen; the merged one keeps its state and history
    assert issues.issue("g", a).first_seen == 1000  # type: ignore[union-attr]
    assert issues.issue("g", b).state == "unresolved"  # type: ignore[union-attr]
    # merging a into c: b, merged into a, follows to c; merging into b merges into where b is counted
    assert issues.merge("g", a, c, 6000, "k") == Merge(a, c, 6000, "k")
    assert issues.grouping("g").merges == {b: Merge(b, c, 4000, "k"), a: Merge(a, c, 6000, "k")}
    assert issues.grouping("g").group(b) == c and issues.grouping("g").group(d) == d
    assert issues.merged_into("g", b) == Merge(b, c, 4000, "k") and issues.merged_into("g", a) == Merge(a, c, 6000, "k")
    assert issues.merged_into("g", c) is None and issues.merged_into("h", b) is None  # c's own; another sku's
    assert issues.issue("g", c).first_seen == 1000  # type: ignore[union-attr]
    issues.observe([Crash("g", d, None, 7000)], 7000)
    assert issues.merge("g", d, b, 8000, "k") == Merge(d, c, 8000, "k")
    assert issues.merge("g", c, d, 8000, "k") == "cycle"


def test_merges_and_changes_of_groups_at_once_all_answer(stores: tuple[CrashIndex, IssueStore]) -> None:
    """Found from outside: on MariaDB three merges at once that together would close a cycle
    deadlocked, about one round in eight, and the loser answered 503."""
    _, issues = stores
    a, b, c, _ = SIGNATURES
    for n in range(16):
        sku = f"at-once-{n}"
        issues.observe([Crash(sku, s, None, 1000) for s in (a, b, c)], 1000)
        pairs = [(a, b), (b, c), (c, a)]
        made = at_once(3, lambda i, sku=sku, pairs=pairs: issues.merge(sku, *pairs[i], 2000 + i, "k"))  # type: ignore[misc]
        assert sorted(type(m).__name__ for m in made) == ["Merge", "Merge", "str"], made  # the third: a cycle
        changed = at_once(3, lambda i, sku=sku: issues.change(sku, a, Change("resolved", 3000 + i, "k")))  # type: ignore[misc]
        assert all(changed)


def test_a_regrouped_report_makes_its_issue_without_an_alert(stores: tuple[CrashIndex, IssueStore]) -> None:
    index, issues = stores
    a, b, *_ = SIGNATURES
    issues.observe([Crash("g", a, "1", 5000)], 5000)
    issues.regrouped([Crash("g", b, "2", 3000), Crash("g", b, "1", 2000), Crash("g", a, "1", 4000)])
    issues.regrouped([Crash("g", b, "2", 2500)])  # later than its first: nothing moves
    new = issues.issue("g", b)
    assert new is not None and (new.state, new.first_seen, new.episode) == ("unresolved", 2000, 0)
    assert issues.issue("g", a).first_seen == 4000  # type: ignore[union-attr]
    assert [h.state for h in issues.history("g", b, 5)] == ["unresolved"]
    assert not issues.raised(f"new-group:g:{b}:0")

    index.insert_many([IndexEntry(report_key=f"{n:032x}", event_id=f"e{n}", sku="g", received_at=n, size_bytes=n,
                                  build_version="1", signature=a, crash_type="AV") for n in (1, 2, 3)])
    before = {r.report_id: r for r in index.find(ReportFilter("g", 10))}
    first, second, _ = before
    index.regroup({first: b, second: None, 10**9: b})  # one that is not there is passed over
    index.regroup({first: b, second: None})
    after = {r.report_id: r for r in index.find(ReportFilter("g", 10))}
    assert after == {i: replace(r, entry=replace(r.entry, signature={first: b, second: None}.get(i, a)))
                     for i, r in before.items()}
    assert [(x.build, x.count) for x in issues.reports("g", b)] == [("1", 1)]


# --- random histories against a model

FRAMES = ("Game::Tick", "Game::Tock", "std::vector::push", "malloc", "Render::Draw", "Net::Recv", "Net::Send")
GLOBS = ("std::*", "malloc", "*::Draw", "Net::*", "Game::T?ck", "Game::Tick")
_report = st.tuples(st.just("report"), st.lists(st.sampled_from(FRAMES), min_size=1, max_size=8))
_rules = st.tuples(st.just("rules"), st.lists(st.sampled_from(GLOBS), max_size=2),
                   st.lists(st.sampled_from(GLOBS), max_size=2))
_merge = st.tuples(st.just("merge"), st.integers(0, 20), st.integers(0, 20))
_reprocess = st.tuples(st.just("reprocess"))


def _model_signature(frames: Sequence[str], skip: Sequence[str], join: Sequence[str]) -> str | None:
    """crashes.signature's grouping, written plainly."""
    kept = [f for f in frames if not any(fnmatch.fnmatchcase(f, g) for g in skip)]
    elements: list[str] = []
    i = 0
    while i < len(kept) and len(elements) < 5:
        element = [kept[i]]
        while any(fnmatch.fnmatchcase(element[-1], g) for g in join) and i + 1 < len(kept):
            i += 1
            element.append(kept[i])
        elements.append(" | ".join(element))
        i += 1
    return hashlib.sha256("\n".join(elements).encode()).hexdigest()[:16] if elements else None


class _Model:
    def __init__(self) -> None:
        self.skip: list[str] = []
        self.join: list[str] = []
        self.merges: dict[str, str] = {}
        self.issues: set[str] = set()

    def group(self, frames: Sequence[str]) -> str | None:
        raw = _model_signature(frames, self.skip, self.join)
        return None if raw is None else self.merges.get(raw, raw)

    def merge(self, signature: str, into: str) -> bool:
        target = self.merges.get(into, into)
        if signature == into or target == signature or self.merges.get(signature, target) != target:
            return False
        self.merges = {s: target if t == signature else t for s, t in self.merges.items()} | {signature: target}
        return True


def _regroup_all(index: CrashIndex, documents: DocumentStore, issues: IssueStore, request: RegroupRequest) -> None:
    """Every page of a reprocessing, each twice (a redelivery), 3 reports a page."""
    while True:
        regroup(index, documents, issues, request, page_size=3)
        done = regroup(index, documents, issues, request, page_size=3)
        if done.more is None:
            return
        request = RegroupRequest.model_validate_json(done.more.value)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.one_of(_report, _report, _rules, _merge, _reprocess), min_size=1, max_size=25))
def test_every_report_ends_in_the_group_a_recomputation_gives(
        stores: tuple[CrashIndex, IssueStore], others: tuple[DocumentStore, EventLog],
        steps: list[tuple[Any, ...]]) -> None:
    index, issues = stores
    documents, log = others
    sku = f"g{uuid.uuid4().hex[:8]}"
    groupings = Groupings(issues, ttl_ms=0)
    model = _Model()
    traces: dict[str, list[str]] = {}
    for n, step in enumerate(steps):
        if step[0] == "report":
            event_id = str(uuid.uuid4())
            key = report_key(event_id)
            payload = json.dumps({"sku": sku, "buildVersion": f"1.{n % 3}", "stackTrace": "\n".join(step[1])})
            record = LogRecord(CRASHES, 0, n, envelope_value(event_id, key, 1000 + n, payload.encode()), None, (),
                               0)
            [entry] = persist_crashes([record], documents, index, log, 3600, issues=issues, groupings=groupings)
            traces[key] = step[1]
            assert entry.signature == model.group(step[1])  # new reports: under the grouping now
            if entry.signature is not None:
                model.issues.add(entry.signature)
        elif step[0] == "rules":
            issues.set_rules(sku, step[1], step[2], n, "test")
            model.skip, model.join = step[1], step[2]
        elif step[0] == "merge" and len(model.issues) >= 2:
            known = sorted(model.issues)
            signature, into = known[step[1] % len(known)], known[step[2] % len(known)]
            made = issues.merge(sku, signature, into, n, "test")
            assert isinstance(made, Merge) == model.merge(signature, into), (made, signature, into)
            if isinstance(made, Merge):
                event("a merge moved reports")
                _regroup_all(index, documents, issues, RegroupRequest(regroup=sku, signature=signature))
                assert not {r.entry.signature for r in index.find(ReportFilter(sku, 1000))} & set(model.merges)
            assert {s: m.into for s in model.issues if (m := issues.merged_into(sku, s)) is not None} == model.merges
        elif step[0] == "reprocess":
            before = index.find(ReportFilter(sku, 1000))
            _regroup_all(index, documents, issues, RegroupRequest(regroup=sku))
            after = index.find(ReportFilter(sku, 1000))
            # nothing lost, doubled or changed but the signature
            assert [replace(r, entry=replace(r.entry, signature=None)) for r in after] == [
                replace(r, entry=replace(r.entry, signature=None)) for r in before]
            assert {r.entry.report_key: r.entry.signature for r in after} == {
                key: model.group(frames) for key, frames in traces.items()}
            model.issues |= {s for r in after if (s := r.entry.signature) is not None}
    # whatever the steps, a last reprocessing leaves every report where the model says, in a group
    # with an issue seen no later than its first report
    _regroup_all(index, documents, issues, RegroupRequest(regroup=sku))
    final = index.find(ReportFilter(sku, 1000))
    assert {r.entry.report_key: r.entry.signature for r in final} == {
        key: model.group(frames) for key, frames in traces.items()}
    for signature in {r.entry.signature for r in final} - {None}:
        issue = issues.issue(sku, str(signature))
        assert issue is not None
        assert issue.first_seen <= min(r.entry.received_at for r in final if r.entry.signature == signature)
