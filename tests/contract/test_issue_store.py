"""The issue store (ports.issues) on both storages: crash groups' states, regressions, alerts once
per episode, webhooks and their deliveries; and random streams of crashes and changes against a
plain model, each batch observed twice (a redelivery) without a second alert."""

from __future__ import annotations

import json
import shutil
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.embedded.index import SqliteIndexDatabase
from adapters.embedded.issues import SqliteIssueStore
from adapters.mysql.issues import MysqlIssueStore
from adapters.sql import migrations
from adapters.sql.reads import SqlDatabase
from adapters.sql.schema import crash_issues, webhook_alerts
from adapters.sql.statements import Statement, insert
from ports import CrashIndex, IndexEntry
from ports.issues import (
    ALERT_KINDS,
    Alert,
    BuildReports,
    Change,
    Crash,
    Delivery,
    Episode,
    IssueStore,
    RaisedAlert,
    Webhook,
    at_or_after,
    build_order,
)
from tests.at_once import at_once
from tests.contract.conftest import ENGINES
from tests.services import mysql_database, namespace


def _kinds(alerts: list[Alert]) -> list[tuple[str, int]]:
    return [(a.kind, a.body["episode"]) for a in alerts]


def test_a_new_group_alerts_once_and_a_resolved_one_regresses_in_its_build_or_later(
        stores: tuple[CrashIndex, IssueStore]) -> None:
    _, issues = stores
    first = Crash("g", "aa11", "1.0", 1000)
    assert _kinds(issues.observe([first], 1000)) == [("new-group", 0)]
    assert issues.observe([first], 1001) == []  # a redelivery
    issue = issues.issue("g", "aa11")
    assert issue is not None and (issue.state, issue.first_seen, issue.changed_by) == ("unresolved", 1000, "blackbox")
    assert issues.issue("g", "bb22") is None and issues.issue("h", "aa11") is None

    resolved = issues.change("g", "aa11", Change("resolved", 2000, "key-1", build="1.10"))
    assert resolved is not None
    assert (resolved.state, resolved.build, resolved.changed_by) == ("resolved", "1.10", "key-1")
    # older builds, a report from before the resolution, one with no build: still resolved
    assert issues.observe([Crash("g", "aa11", "1.9", 3000), Crash("g", "aa11", "1.10", 1500),
                           Crash("g", "aa11", None, 3100)], 3100) == []
    assert issues.issue("g", "aa11").state == "resolved"  # type: ignore[union-attr]
    again = Crash("g", "aa11", "1.10.1", 4000)
    alerts = issues.observe([again, Crash("g", "aa11", "2.0", 4500)], 4500)
    assert _kinds(alerts) == [("regressed", 1)]
    assert alerts[0].body["resolvedIn"] == "1.10" and alerts[0].body["build"] == "1.10.1"
    assert alerts[0].body["receivedAt"] == "1970-01-01T00:00:04.000Z"  # as every answer gives times
    assert issues.observe([again], 5000) == []
    assert issues.issue("g", "aa11").state == "regressed"  # type: ignore[union-attr]
    # a second episode: resolved in no build, any later report regresses it
    issues.change("g", "aa11", Change("resolved", 6000, "server"))
    assert _kinds(issues.observe([Crash("g", "aa11", None, 7000)], 7000)) == [("regressed", 2)]
    assert [(i.state, i.changed_by) for i in issues.history("g", "aa11", 10)] == [
        ("regressed", "blackbox"), ("resolved", "server"), ("regressed", "blackbox"), ("resolved", "key-1"),
        ("unresolved", "blackbox")]
    assert len(issues.history("g", "aa11", 2)) == 2
    assert issues.change("g", "nope", Change("resolved", 1, "server")) is None


def batch(index: CrashIndex, issues: IssueStore, signature: str, received: list[int]) -> list[Crash]:
    """A batch of reports of one group, as the consumer takes it: seen, indexed, then counted."""
    crashes = [Crash("g", signature, "1.0", at) for at in received]
    issues.observe(crashes, received[-1])
    index.insert_many([IndexEntry(report_key=f"{signature}-{at}", event_id=f"e-{signature}-{at}", sku="g",
                                  received_at=at, size_bytes=1, signature=signature, build_version="1.0")
                       for at in received])
    issues.counted(crashes)
    return crashes


def test_ignored_until_a_time_or_a_count_of_reports(stores: tuple[CrashIndex, IssueStore]) -> None:
    index, issues = stores

    def report(n: int, signature: str, at: int) -> None:
        # as the consumer does: seen, indexed, then counted (crashes.persistence)
        crashes = [Crash("g", signature, "1.0", at)]
        issues.observe(crashes, at)
        index.insert_many([IndexEntry(report_key=uuid.uuid4().hex, event_id=f"e-{signature}-{n}", sku="g",
                                      received_at=at, size_bytes=1, signature=signature, build_version="1.0")])
        issues.counted(crashes)

    report(0, "c1", 100)
    report(0, "c2", 100)
    issues.change("g", "c1", Change("ignored", 200, "server", ignore_until=1000))
    issues.change("g", "c2", Change("ignored", 200, "server", ignore_for=2))
    assert issues.issue("g", "c2").ignore_count == 3  # type: ignore[union-attr]
    report(1, "c1", 999)
    report(1, "c2", 300)
    assert (issues.issue("g", "c1").state, issues.issue("g", "c2").state) == ("ignored", "ignored")  # type: ignore[union-attr]
    report(2, "c1", 1000)
    report(2, "c2", 400)
    assert (issues.issue("g", "c1").state, issues.issue("g", "c2").state) == ("unresolved", "ignored")  # type: ignore[union-attr]
    report(3, "c2", 500)  # the first after two more
    assert issues.issue("g", "c2").state == "unresolved"  # type: ignore[union-attr]
    assert issues.reports("g", "c2") == [BuildReports("1.0", 4, 100, 500, 0)]
    # a batch's reports count with those before them in it: the third after two more ends it
    report(0, "c3", 100)
    issues.change("g", "c3", Change("ignored", 200, "server", ignore_for=2))
    batch(index, issues, "c3", [300, 301])
    assert issues.issue("g", "c3").state == "ignored"  # type: ignore[union-attr]
    batch(index, issues, "c3", [302, 303, 304])
    issue = issues.issue("g", "c3")
    assert issue is not None and (issue.state, issue.changed_at) == ("unresolved", 304)
    # ignored forever: no report moves it, and none regresses it
    issues.change("g", "c1", Change("ignored", 2000, "server"))
    report(4, "c1", 5000)
    assert issues.issue("g", "c1").state == "ignored"  # type: ignore[union-attr]



def test_a_count_of_reports_holds_across_redeliveries_and_two_consumers_at_once(
        stores: tuple[CrashIndex, IssueStore]) -> None:
    """Found in review: counted before the batch's index write, a redelivered batch's reports counted
    twice (an ignore for 3 more ended at 2), and two consumers' batches of one group, each seen
    before the other's write, counted each other's not at all (it outlasted its count)."""
    index, issues = stores
    batch(index, issues, "d1", [100])
    batch(index, issues, "d2", [100])
    issues.change("g", "d1", Change("ignored", 200, "server", ignore_for=3))
    issues.change("g", "d2", Change("ignored", 200, "server", ignore_for=2))
    again = batch(index, issues, "d1", [300, 301])
    issues.observe(again, 400)  # delivered again: seen, indexed already, counted
    issues.counted(again)
    assert issues.issue("g", "d1").state == "ignored"  # type: ignore[union-attr]
    batch(index, issues, "d1", [302])
    assert issues.issue("g", "d1").state == "ignored"  # type: ignore[union-attr]
    batch(index, issues, "d1", [303])  # the first after 3 more
    assert issues.issue("g", "d1").state == "unresolved"  # type: ignore[union-attr]
    # consumers A and B, each with a batch of d2: both seen before either is indexed
    a, b = [Crash("g", "d2", "1.0", at) for at in (300, 301)], [Crash("g", "d2", "1.0", 302)]
    issues.observe(a, 301)
    issues.observe(b, 302)
    for crashes, state in ((a, "ignored"), (b, "unresolved")):  # B's is the third after two more
        index.insert_many([IndexEntry(report_key=f"d2-{c.received_at}", event_id=f"e-d2-{c.received_at}", sku="g",
                                      received_at=c.received_at, size_bytes=1, signature="d2", build_version="1.0")
                           for c in crashes])
        issues.counted(crashes)
        assert issues.issue("g", "d2").state == state  # type: ignore[union-attr]
    # a batch of more groups than one read names: the one an ignore waits to count is found
    many = [Crash("g", f"m{n:03d}", "1.0", 500) for n in range(300)]
    issues.observe(many, 500)
    issues.change("g", "m299", Change("ignored", 600, "server", ignore_for=1))
    batch(index, issues, "m299", [700])
    assert issues.issue("g", "m299").state == "ignored"  # type: ignore[union-attr]
    index.insert_many([IndexEntry(report_key="m299-800", event_id="e-m299-800", sku="g", received_at=800,
                                  size_bytes=1, signature="m299", build_version="1.0")])
    issues.counted([Crash("g", f"m{n:03d}", "1.0", 800) for n in range(300)])
    assert issues.issue("g", "m299").state == "unresolved"  # type: ignore[union-attr]

def test_an_ignore_for_a_count_counts_only_the_reports_received_after_it(stores: tuple[CrashIndex, IssueStore]) -> None:
    """Found from outside: the count was the group's reports in the index, so those received before the
    ignore and indexed after it (a consumer behind in a crash storm, or a group merged in) counted among
    the more it waits for, and the first report after the ignore ended it."""
    index, issues = stores
    batch(index, issues, "e1", [100])
    issues.change("g", "e1", Change("ignored", 200, "server", ignore_for=2))
    batch(index, issues, "e1", [150, 160, 170])  # received before the ignore, indexed after it
    batch(index, issues, "e1", [300, 301])  # two more
    assert issues.issue("g", "e1").state == "ignored"  # type: ignore[union-attr]
    batch(index, issues, "e1", [302])  # the first after two more
    assert issues.issue("g", "e1").state == "unresolved"  # type: ignore[union-attr]


def test_an_ignore_an_earlier_release_set_counts_as_it_did_whatever_a_later_one_left(
        stores: tuple[CrashIndex, IssueStore]) -> None:
    """Found in review: a release before ignore_for rewrites an issue without it, so a count a later
    release had set was read with the ignore that release set after (in a rolling upgrade, or after
    a rollback): an ignore for 10 more ended after 3."""
    index, issues = stores
    batch(index, issues, "f1", [100])
    issues.change("g", "f1", Change("ignored", 200, "server", ignore_for=2))
    # the earlier release's ignore for 10 more: the group's count then and 10, every column it knows
    known = {"state": "ignored", "build": None, "ignore_until": None, "ignore_count": 1 + 10, "changed_at": 300,
             "changed_by": "server"}
    earlier = Statement(sa.update(crash_issues).where(crash_issues.c.signature == "f1").values(
        **{column: sa.bindparam(column) for column in known}))
    issues._database.in_transaction(lambda t: t.execute(earlier, known))  # type: ignore[attr-defined]
    batch(index, issues, "f1", [400, 401, 402])
    assert issues.issue("g", "f1").state == "ignored"  # type: ignore[union-attr]


def test_a_change_stamped_before_the_one_it_follows_is_told_after_it(stores: tuple[CrashIndex, IssueStore]) -> None:
    """Found from outside: two PUTs at once were each stamped before their transaction, so the one that
    committed last (and whose state the group kept) could be told older than the other: `history`,
    newest first, was not by `changedAt`."""
    index, issues = stores
    batch(index, issues, "h1", [100])
    issues.change("g", "h1", Change("resolved", 500, "server", build="9"))
    after = issues.change("g", "h1", Change("resolved", 400, "server", build="2"))  # stamped first, committed last
    assert after is not None and (after.build, after.changed_at) == ("2", 501)
    told = [line.changed_at for line in issues.history("g", "h1", 10)]
    assert told == sorted(told, reverse=True), told


def test_puts_of_a_new_webhook_at_once_make_it_once(stores: tuple[CrashIndex, IssueStore]) -> None:
    """Found from outside: each PUT asked whether the webhook existed before its write, so of six at
    once up to five answered 201 (made); on MariaDB they could deadlock (503) too."""
    _, issues = stores
    for n in range(6):
        name = f"at-once-{n}"
        made = at_once(6, lambda i, name=name: issues.put_webhook(  # type: ignore[misc]
            Webhook(name, f"https://example.com/{i}", "s" * 16, ("new-group",), i)))
        assert made.count(True) == 1
        assert [w.name for w in issues.webhooks()].count(name) == 1


def test_consumers_observing_the_same_groups_at_once_all_answer(stores: tuple[CrashIndex, IssueStore]) -> None:
    """Found from outside (the bench's two crash consumers on MariaDB): observing a group already
    made took a shared lock on its row (INSERT IGNORE's, finding it) and then the exclusive one, so
    two consumers at once deadlocked, and the loser's whole batch was tried again. A group made by
    two at once is made once."""
    _, issues = stores
    for n in range(8):
        sku = f"observed-{n}"
        groups = [f"s{g}" for g in range(4)]
        made = at_once(2, lambda i, sku=sku, groups=groups: issues.observe(  # type: ignore[misc]
            [Crash(sku, g, "1", 1000 + i) for g in groups], 1000 + i))
        assert sorted(len(alerts) for alerts in made) == [0, 4]  # each new group's alert, once
        for round_ in range(4):
            seen = at_once(2, lambda i, sku=sku, groups=groups, round_=round_: issues.observe(  # type: ignore[misc]
                [Crash(sku, g, "1", 2000 + round_) for g in groups], 2000 + round_))
            assert seen == [[], []]


def test_webhooks_get_each_alert_of_their_kinds_once(stores: tuple[CrashIndex, IssueStore]) -> None:
    _, issues = stores
    assert issues.put_webhook(Webhook("ops", "https://hooks.example/a", "s3cret", ("regressed",), 10))
    assert issues.put_webhook(Webhook("all", "https://hooks.example/b", "s", ("new-group", "regressed"), 10))
    assert not issues.put_webhook(Webhook("ops", "https://hooks.example/c", "s4", ("regressed", "new-group"), 20))
    assert [w.name for w in issues.webhooks()] == ["all", "ops"]
    assert issues.webhooks()[1] == Webhook("ops", "https://hooks.example/c", "s4", ("regressed", "new-group"), 20)
    issues.put_webhook(Webhook("ops", "https://hooks.example/c", "s4", ("regressed",), 20))
    alert = Alert("new-group:g:aa:0", "new-group", 100, {"text": "new", "n": [1]})
    assert not issues.raised(alert.key)
    assert issues.raise_alert(alert)
    assert issues.raised(alert.key) and not issues.raised("new-group:g:aa:1")
    assert not issues.raise_alert(alert)
    assert issues.raise_alert(Alert("regressed:g:aa:1", "regressed", 200, {"text": "again"}))
    assert issues.raise_alert(Alert("season-end:b:1", "season-end", 200, {"text": "nobody takes it"}))
    due = issues.due(150, 10)
    assert [(d.webhook, a.key, w.url) for d, a, w in due] == [("all", "new-group:g:aa:0", "https://hooks.example/b")]
    assert due[0][1] == alert and due[0][0].status == "pending"
    assert {(d.webhook, a.key) for d, a, _ in issues.due(300, 10)} == {
        ("all", "new-group:g:aa:0"), ("all", "regressed:g:aa:1"), ("ops", "regressed:g:aa:1")}
    # one run claims a delivery; another that read it before gets False
    assert issues.claim(due[0][0], 1150, 150) and not issues.claim(due[0][0], 1160, 160)
    assert [(d.webhook, a.key) for d, a, _ in issues.due(150, 10)] == []
    sent = Delivery("all", "new-group:g:aa:0", "delivered", 1, 100, 200, None, 400)
    issues.attempted(sent)
    issues.attempted(Delivery("all", "regressed:g:aa:1", "pending", 1, 1000, 500, "HTTP 500", 300))
    assert {(d.webhook, a.key) for d, a, _ in issues.due(300, 10)} == {("ops", "regressed:g:aa:1")}
    page = issues.deliveries("all", None, 1)
    assert page == [(sent, alert)]
    rest = issues.deliveries("all", (400, "new-group:g:aa:0"), 5)
    assert [(d.alert_key, d.last_code, d.last_error) for d, _ in rest] == [("regressed:g:aa:1", 500, "HTTP 500")]
    assert issues.delete_webhook("all") and not issues.delete_webhook("all")
    assert issues.deliveries("all", None, 5) == []
    assert [d.webhook for d, _, _ in issues.due(2000, 10)] == ["ops"]


def test_a_run_whose_claim_ran_out_leaves_the_next_runs_outcome(stores: tuple[CrashIndex, IssueStore]) -> None:
    """Found in review: a run that outlasted its claim (a receiver's timeout after a slow name
    lookup, a paused machine) stored its failure over the delivery another run made meanwhile, and
    the alert was sent again."""
    _, issues = stores
    issues.put_webhook(Webhook("w", "https://hooks.example/w", "s1", ("regressed",), 0))
    issues.raise_alert(Alert("regressed:g:aa:1", "regressed", 100, {"text": "again"}))
    [(first, _, _)] = issues.due(100, 10)
    assert issues.claim(first, 60_100, 100)  # run A
    [(second, _, _)] = issues.due(60_100, 10)  # A's claim ran out: run B takes it up
    assert issues.claim(second, 120_100, 60_100)
    assert issues.attempted(replace(second, status="delivered", attempts=1, last_code=204, updated_at=60_200))
    assert not issues.attempted(replace(first, attempts=1, next_attempt=160_000, last_error="timed out",
                                        updated_at=70_000))
    [(delivery, _)] = issues.deliveries("w", None, 5)
    assert (delivery.status, delivery.attempts, delivery.last_code) == ("delivered", 1, 204)
    assert issues.due(1_000_000, 10) == []
    # the other order (found in review): the stale failure stored first, the delivery after it
    issues.raise_alert(Alert("regressed:g:aa:2", "regressed", 100, {"text": "again"}))
    [(first, _, _)] = issues.due(100, 10)
    assert issues.claim(first, 60_100, 100)
    [(second, _, _)] = issues.due(60_100, 10)
    assert issues.claim(second, 120_100, 60_100)
    assert issues.attempted(replace(first, attempts=1, next_attempt=160_000, last_error="timed out", updated_at=70_000))
    assert issues.attempted(replace(second, status="delivered", attempts=1, last_code=204, updated_at=71_000))
    assert not issues.attempted(replace(second, status="delivered", attempts=1, last_code=200, updated_at=72_000))
    # nor does a third run's failure, claimed after the stale one was stored, replace the delivery
    assert not issues.attempted(replace(second, attempts=2, next_attempt=200_000, last_code=503,
                                        last_error="HTTP 503", updated_at=73_000))
    assert [(d.status, d.last_code) for d, a in issues.deliveries("w", None, 5) if a.key.endswith(":2")] == [
        ("delivered", 204)]
    assert issues.due(1_000_000, 10) == []


def _history(issues: IssueStore, sku: str, from_ms: int, to_ms: int, limit: int) -> list[RaisedAlert]:
    """Every page, each asked for after the last alert of the one before."""
    found: list[RaisedAlert] = []
    while True:
        before = None if not found else (found[-1].alert.created_at, found[-1].alert.key)
        page = issues.alert_history(sku, from_ms, to_ms, before, limit)
        found += page
        if len(page) < limit:
            return found


def test_a_run_takes_each_webhooks_oldest_due_deliveries_up_to_its_share(stores: tuple[CrashIndex, IssueStore]) -> None:
    """Found in review: a run took the oldest due deliveries whatever their webhook, so one that
    hung with a backlog filled every run, and the other webhooks waited it out."""
    _, issues = stores
    issues.put_webhook(Webhook("slow", "https://hooks.example/s", "s1", ("regressed",), 0))
    for n in range(6):
        issues.raise_alert(Alert(f"regressed:g:aa:{n}", "regressed", 100 + n, {"text": "again"}))
    issues.put_webhook(Webhook("fast", "https://hooks.example/f", "s2", ("regressed",), 0))
    issues.raise_alert(Alert("regressed:g:aa:9", "regressed", 200, {"text": "again"}))
    taken = [(d.webhook, a.key) for d, a, _ in issues.due(1000, 4, per_webhook=2)]
    assert taken == [("slow", "regressed:g:aa:0"), ("slow", "regressed:g:aa:1"), ("fast", "regressed:g:aa:9")]
    assert len(issues.due(1000, 100)) == 8  # as many as due, without a share


def test_an_announcement_is_claimed_once_until_retention_purges_it(stores: tuple[CrashIndex, IssueStore]) -> None:
    _, issues = stores
    assert at_once(2, lambda i: issues.announce("crash-spike:g:60000", 100)) in ([True, False], [False, True])
    assert not issues.announce("crash-spike:g:60000", 200)
    assert issues.announce("crash-spike:g:120000", 200)
    issues.purge(150)
    assert issues.announce("crash-spike:g:60000", 300) and not issues.announce("crash-spike:g:120000", 300)


def test_a_groups_alerts_go_in_the_order_raised_also_after_a_rest(stores: tuple[CrashIndex, IssueStore]) -> None:
    """Found in review: a rest gives every delivery of a webhook one due time, and they then went by
    key, every new group before every regression, whatever came first."""
    _, issues = stores
    issues.put_webhook(Webhook("ops", "https://hooks.example/o", "s1", ("new-group", "regressed"), 0))
    issues.raise_alert(Alert("regressed:a:aa:1", "regressed", 100, {"text": "again"}))
    issues.raise_alert(Alert("new-group:z:zz:0", "new-group", 200, {"text": "new"}))
    issues.rest("ops", 5000)
    assert [a.key for _, a, _ in issues.due(5000, 10)] == ["regressed:a:aa:1", "new-group:z:zz:0"]


def test_an_alert_raised_while_its_webhook_rests_waits_with_it(stores: tuple[CrashIndex, IssueStore]) -> None:
    """Found from outside: the rest moved only the deliveries there were, so each alert raised while
    a receiver was down was tried at once, spending an attempt and a run's timeout on it."""
    _, issues = stores
    issues.put_webhook(Webhook("down", "https://hooks.example/d", "s1", ("new-group", "season-end"), 0))
    issues.put_webhook(Webhook("up", "https://hooks.example/u", "s2", ("new-group",), 0))
    issues.raise_alert(Alert("new-group:g:aa:0", "new-group", 100, {"text": "new"}))
    [due] = [d for d in issues.due(100, 10) if d[0].webhook == "down"]
    assert issues.claim(due[0], 60_100, 100)
    assert issues.attempted(replace(due[0], attempts=1, next_attempt=5000, last_error="refused", updated_at=100))
    issues.rest("down", 5000)
    issues.raise_alert(Alert("new-group:g:bb:0", "new-group", 200, {"text": "new"}))
    assert {(d.webhook, a.key) for d, a, _ in issues.due(300, 10)} == {
        ("up", "new-group:g:aa:0"), ("up", "new-group:g:bb:0")}
    # the one that failed is tried first when the rest ends, and its backoff doubles: found in review,
    # one raised during the rest went first, failed at its first attempt, and rested the webhook 30 s
    # again, while the one that failed never came to its last attempt
    issues.raise_alert(Alert("season-end:b:1", "season-end", 300, {"text": "top 10"}))
    assert [a.key for d, a, _ in issues.due(5000, 10) if d.webhook == "down"] == [
        "new-group:g:aa:0", "season-end:b:1", "new-group:g:bb:0"]


def test_a_storm_of_new_groups_holds_back_no_season_end_nor_a_storms_signals(
        stores: tuple[CrashIndex, IssueStore]) -> None:
    """Left alone in notes, then mended: a webhook's due deliveries went oldest first, 5 a run (10 a
    minute in AWS), so the thousands of new groups of a bad patch held back its season ends, and
    the velocity alert of that very storm, for hours."""
    _, issues = stores
    issues.put_webhook(Webhook("ops", "https://hooks.example/o", "s1", ALERT_KINDS, 0))
    for n in range(20):
        issues.raise_alert(Alert(f"new-group:g:{n:04x}:0", "new-group", 100 + n, {"text": "new"}))
    issues.raise_alert(Alert("regressed:g:aa:1", "regressed", 150, {"text": "again"}))
    issues.raise_alert(Alert("crash-free-drop:g:1", "crash-free-drop", 190, {"text": "drop"}))
    issues.raise_alert(Alert("velocity:g:1", "velocity", 180, {"text": "fast"}))
    issues.raise_alert(Alert("season-end:b:1", "season-end", 200, {"text": "top 10"}))
    taken = [a.key for _, a, _ in issues.due(1000, 100, per_webhook=5)]
    # a group's alerts in the order raised: its regression after its new group (tests/e2e/test_crash_issues.py)
    assert taken == ["season-end:b:1", "velocity:g:1", "crash-free-drop:g:1", "new-group:g:0000:0",
                     "new-group:g:0001:0"]


def test_the_alert_history_is_a_skus_alerts_newest_first_with_their_deliveries(
        stores: tuple[CrashIndex, IssueStore]) -> None:
    _, issues = stores
    issues.put_webhook(Webhook("b-ops", "https://hooks.example/a", "s" * 16, ("regressed", "velocity"), 10))
    issues.put_webhook(Webhook("a-all", "https://hooks.example/b", "s" * 16, ("regressed",), 10))
    raised = [Alert("new-group:g:aa:0", "new-group", 100, {"sku": "g", "signature": "aa", "text": "new"}),
              Alert("regressed:g:aa:1", "regressed", 200, {"sku": "g", "signature": "aa", "text": "again"}),
              Alert("regressed:g:bb:1", "regressed", 200, {"sku": "g", "signature": "bb", "text": "tie"}),
              Alert("new-group:h:aa:0", "new-group", 150, {"sku": "h", "signature": "aa", "text": "other sku"}),
              Alert("season-end:b:1", "season-end", 150, {"board": "b", "text": "a board's"})]
    for alert in raised:
        assert issues.raise_alert(alert)
    sent = Delivery("b-ops", "regressed:g:aa:1", "delivered", 1, 200, 204, None, 300)
    issues.attempted(sent)
    episode = Episode("velocity:k", "velocity", 250)
    assert issues.open_episode(episode, Alert(episode.alert_key, "velocity", 250, {"sku": "g", "text": "fast"}))
    history = issues.alert_history("g", 0, 1000, None, 10)
    assert [(h.alert.key, h.closed_at) for h in history] == [
        ("velocity:k:250", None), ("regressed:g:bb:1", None), ("regressed:g:aa:1", None), ("new-group:g:aa:0", None)]
    assert history[2].alert == raised[1]
    pending = Delivery("a-all", "regressed:g:aa:1", "pending", 0, 200, None, None, 200)
    assert history[2].deliveries == (pending, sent)
    assert [d.webhook for d in history[0].deliveries] == ["b-ops"] and history[3].deliveries == ()
    assert _history(issues, "g", 0, 1000, 1) == history
    assert [h.alert.key for h in issues.alert_history("g", 100, 250, (200, "regressed:g:bb:1"), 10)] == [
        "regressed:g:aa:1", "new-group:g:aa:0"]
    assert issues.alert_history("h", 151, 1000, None, 10) == []
    assert [h.alert.key for h in issues.alert_history("h", 150, 151, None, 10)] == ["new-group:h:aa:0"]
    # a closing is timed on the episode's alert; a run that read an older one times nothing
    assert not issues.close_episode(Episode("velocity:k", "velocity", 249), 400)
    assert issues.close_episode(episode, 500)
    assert issues.alert_history("g", 250, 251, None, 10)[0].closed_at == 500


@pytest.mark.parametrize("engine", ENGINES)
def test_an_alert_raised_before_the_history_was_kept_is_in_it(engine: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Migration shared/0013 gives the alerts stored before it their body's sku."""
    earlier = tmp_path / "shared"
    earlier.mkdir()
    for migration in Path(str(migrations.SHARED)).glob("*.sql"):
        if migration.name < "0013":
            shutil.copy(migration, earlier / migration.name)
    monkeypatch.setattr(migrations, "SHARED", earlier)
    old = Alert("new-group:g:aa:0", "new-group", 100, {"kind": "new-group", "sku": "g:pc", "text": "new"})

    def raise_as_before(database: SqlDatabase) -> None:
        with database.transaction() as t:
            t.execute_rows(insert(webhook_alerts, ("alert_key", "kind", "created_at", "body")),
                           [(old.key, old.kind, old.created_at, json.dumps(old.body))])
        monkeypatch.undo()

    if engine == "embedded":
        database = SqliteIndexDatabase(tmp_path / "index.sqlite")
        raise_as_before(database)
        database.close()
        issues: IssueStore = SqliteIssueStore(SqliteIndexDatabase(tmp_path / "index.sqlite"))
        assert [h.alert for h in issues.alert_history("g:pc", 0, 1000, None, 10)] == [old]
        return
    with mysql_database(namespace()) as mysql:
        raise_as_before(mysql)
        assert "shared/0013_alert_history.sql" in mysql.migrate()
        assert [h.alert for h in MysqlIssueStore(mysql).alert_history("g:pc", 0, 1000, None, 10)] == [old]


def test_build_order_is_by_numbers_then_text() -> None:
    # found from outside: the release itself sorted before its release candidates, so a group
    # resolved in 2.0.0-rc1 never regressed on 2.0.0 (as semver has it, a pre-release is before its release)
    ordered = ["0.9", "1.2", "1.9.2", "1.10", "1.10.0", "1.13", "1.13c", "2.0.0-beta", "2.0.0-rc1", "2.0.0-rc2",
               "2.0.0", "2.0.0-hotfix", "2.0.0.1", "10"]
    assert sorted(reversed(ordered), key=build_order) == ordered
    assert at_or_after("2.0.0", "2.0.0-rc1") and not at_or_after("2.0.0-rc1", "2.0.0")
    assert at_or_after("1.10", "1.9") and at_or_after("1.9", "1.9") and not at_or_after("1.8", "1.9")
    assert at_or_after(None, None) and not at_or_after(None, "1.0")


def test_a_builds_letters_are_any_script_s():
    # found from outside: only A-Z and a-z were letters, so "1.0-é" was "1.0" and "1.0-rcé" was "1.0-rc"
    ordered = ["1.0-rc", "1.0", "1.0-a", "1.0-rcé", "1.0-²", "1.0-é", "1.0-β", "1.٣", "1.10"]
    assert sorted(reversed(ordered), key=build_order) == ordered


# --- against a model ---------------------------------------------------------------------------

BUILDS = ["1", "2", "3"]
SIGNATURES = ["s1", "s2"]


@dataclass
class _Group:
    state: str = "unresolved"
    build: str | None = None
    until: int | None = None
    changed_at: int = 0
    episode: int = 0


@dataclass
class _Model:
    groups: dict[str, _Group] = field(default_factory=dict)
    alerts: list[tuple[str, str, int]] = field(default_factory=list)

    def crash(self, signature: str, build: str | None, at: int) -> None:
        g = self.groups.get(signature)
        if g is None:
            self.groups[signature] = _Group(changed_at=at)
            self.alerts.append(("new-group", signature, 0))
            return
        if at <= g.changed_at:
            return
        builds_after = g.build is None or (build is not None and int(build) >= int(g.build))
        if g.state == "resolved" and builds_after:
            g.state, g.episode, g.changed_at = "regressed", g.episode + 1, at
            self.alerts.append(("regressed", signature, g.episode))
        elif g.state == "ignored" and g.until is not None and at >= g.until:
            g.state, g.build, g.until, g.changed_at = "unresolved", None, None, at


_crash = st.tuples(st.just("crash"), st.sampled_from(SIGNATURES), st.sampled_from([*BUILDS, None]))
_change = st.tuples(st.just("change"), st.sampled_from(SIGNATURES),
                    st.sampled_from(["resolved", "resolved-in", "ignored", "ignored-until", "unresolved"]),
                    st.sampled_from(BUILDS))
_step = st.tuples(st.one_of(_crash, _change), st.integers(1, 30))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.lists(_step, min_size=1, max_size=4), min_size=1, max_size=8))
def test_states_and_alerts_match_a_model(stores: tuple[CrashIndex, IssueStore],
                                         steps: list[list[tuple[tuple[str, ...], int]]]) -> None:
    _, issues = stores
    sku = f"m{uuid.uuid4().hex[:12]}"
    model = _Model()
    raised: list[Alert] = []
    seen: list[Crash] = []
    clock = 0
    for batch in steps:
        crashes: list[Crash] = []
        for action, gap in batch:
            clock += gap
            if action[0] == "crash":
                _, signature, build = action
                crashes.append(Crash(sku, signature, build, clock))
                model.crash(signature, build, clock)
            elif (group := model.groups.get(action[1])) is not None:
                _, signature, state, build = action
                # a change is made after the crashes before it are observed: flush them
                raised += issues.observe(crashes, clock)
                raised += issues.observe(crashes, clock)  # redelivered
                seen += crashes
                crashes = []
                change = {"resolved": Change("resolved", clock, "t"),
                          "resolved-in": Change("resolved", clock, "t", build),
                          "ignored": Change("ignored", clock, "t"),
                          "ignored-until": Change("ignored", clock, "t", ignore_until=clock + 20),
                          "unresolved": Change("unresolved", clock, "t")}[state]
                issues.change(sku, signature, change)
                # every crash before it, redelivered late: none moves what was set after it
                raised += issues.observe(seen, clock)
                group.state = change.state
                group.build, group.until, group.changed_at = change.build, change.ignore_until, clock
        raised += issues.observe(crashes, clock)
        raised += issues.observe(list(reversed(crashes)), clock)  # redelivered, in another order
        seen += crashes
    assert sorted((a.kind, a.body["signature"], a.body["episode"]) for a in raised) == sorted(model.alerts)
    newest_first = sorted(raised, key=lambda a: (a.created_at, a.key), reverse=True)
    assert [h.alert for h in _history(issues, sku, 0, clock + 1, 2)] == newest_first
    for signature, group in model.groups.items():
        issue = issues.issue(sku, signature)
        assert issue is not None
        assert (issue.state, issue.build, issue.episode) == (group.state, group.build, group.episode)


# (signature, build or None, playerId or None)
reports_sent = st.lists(st.tuples(st.sampled_from(SIGNATURES), st.none() | st.sampled_from(BUILDS),
                                  st.none() | st.sampled_from(["p1", "p2", "p3", "p4"])), max_size=25)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sent=reports_sent)
def test_a_groups_reports_and_players_by_build_are_counted_as_brute_force(
        stores: tuple[CrashIndex, IssueStore], sent: list[tuple[str, str | None, str | None]]) -> None:
    index, issues = stores
    sku = f"g{uuid.uuid4().hex[:8]}"
    index.insert_many([IndexEntry(report_key=uuid.uuid4().hex, event_id=str(uuid.uuid4()), sku=sku, received_at=at,
                                  size_bytes=1, signature=signature, build_version=build, player_id=player)
                       for at, (signature, build, player) in enumerate(sent)])
    for signature in SIGNATURES:
        mine = [(at, build, player) for at, (s, build, player) in enumerate(sent) if s == signature]
        by_build: dict[str | None, list[tuple[int, str | None]]] = {}
        for at, build, player in mine:
            by_build.setdefault(build, []).append((at, player))
        expected = {build: BuildReports(build, len(got), min(a for a, _ in got), max(a for a, _ in got),
                                        len({p for _, p in got if p is not None}))
                    for build, got in by_build.items()}
        assert {b.build: b for b in issues.reports(sku, signature)} == expected
        assert issues.players(sku, signature) == len({player for _, _, player in mine if player is not None})


def test_a_webhook_rests_its_pending_deliveries_until_a_time(stores: tuple[CrashIndex, IssueStore]) -> None:
    _, issues = stores
    for name in ("resting", "other"):
        issues.put_webhook(Webhook(name, "https://example.com/", "s" * 16, ("regressed",), 0))
    for n in range(3):
        issues.raise_alert(Alert(f"regressed:rest:ab:{n}", "regressed", 1_000, {"text": "x"}))
    issues.rest("resting", 50_000)
    due = {(d.webhook, d.alert_key) for d, _, _ in issues.due(49_999, 100)}
    assert {w for w, _ in due} == {"other"} and len(due) == 3
    assert len(issues.due(50_000, 100)) == 6
    issues.rest("resting", 40_000)  # never earlier than it was
    assert len(issues.due(49_999, 100)) == 3


def test_the_purge_drops_alerts_and_their_deliveries_past_retention(stores: tuple[CrashIndex, IssueStore]) -> None:
    """Found from outside: the outbox was never purged (157 MB of a 242 MB index after a quarter
    hour of season ends to 200 webhooks), where the reports it speaks of go after 90 days."""
    _, issues = stores
    issues.put_webhook(Webhook("kept-for", "https://example.com/", "s" * 16, ("regressed",), 0))
    issues.raise_alert(Alert("regressed:purge:ab:1", "regressed", 1_000, {"text": "old", "sku": "purge"}))
    issues.raise_alert(Alert("regressed:purge:ab:2", "regressed", 5_000, {"text": "new", "sku": "purge"}))
    assert issues.purge(5_000) >= 2  # the old alert and its delivery
    assert not issues.raised("regressed:purge:ab:1") and issues.raised("regressed:purge:ab:2")
    assert [d.alert_key for d, _ in issues.deliveries("kept-for", None, 10)] == ["regressed:purge:ab:2"]
    assert [a.alert.key for a in issues.alert_history("purge", 0, 10_000, None, 10)] == ["regressed:purge:ab:2"]
