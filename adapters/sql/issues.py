"""Crash groups as issues and the webhooks' outbox (ports.issues) on SQLite and MySQL alike: each
engine's adapter is this class with its errors (port_errors). The index's schema holds them, so a
count of a group's reports is a read of the reports table in the same transaction."""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, sqlite

from adapters.sql.queries import PURGE_CHUNK, purge, through
from adapters.sql.reads import SqlDatabase, Transaction
from adapters.sql.schema import (
    alert_episodes,
    alert_tellers,
    announcements,
    crash_grouping_rules,
    crash_issue_history,
    crash_issues,
    crash_merges,
    reports,
    webhook_alerts,
    webhook_deliveries,
    webhooks,
)
from adapters.sql.statements import Query, Statement, insert, listed, marks, padded
from ports.issues import (
    URGENCY,
    Alert,
    BuildReports,
    Change,
    Crash,
    Delivery,
    DeliveryStatus,
    Episode,
    GroupCount,
    Grouping,
    GroupingRules,
    Issue,
    IssueState,
    Merge,
    MergeRefusal,
    RaisedAlert,
    Webhook,
    issue_alert,
    merge_refusal,
    moved,
    new_issue,
)

_bind = sa.bindparam
_ISSUE = tuple(f.name for f in fields(Issue))
# and the change an ignore_for belongs to (adapters/sql/shared/0020_ignore_for.sql)
_COLUMNS = (*_ISSUE, "ignore_for_at")
_i = crash_issues.c
_OF_GROUP = (_i.sku == _bind("sku"), _i.signature == _bind("signature"))
_GET = Statement(sa.select(*(_i[c] for c in _COLUMNS)).where(*_OF_GROUP))
# MySQL locks the row: two consumers moving one group take turns (SQLite's write transaction holds the file)
_GET_FOR_UPDATE = Statement(sa.select(*(_i[c] for c in _COLUMNS)).where(*_OF_GROUP).with_for_update())


def _add() -> Statement:
    """A group's issue made unless it is there: 1 row if made. On MySQL a row found is locked for
    update (an upsert that sets nothing), not shared as INSERT IGNORE's lock would be, which the
    update after it had to raise to exclusive: two consumers at once deadlocked there."""
    values: dict[str, Any] = {c: _bind(c) for c in _ISSUE}
    lite = sqlite.insert(crash_issues).values(values).on_conflict_do_nothing(index_elements=["sku", "signature"])
    my = mysql.insert(crash_issues).values(values)
    return Statement({"sqlite": lite, "mysql": my.on_duplicate_key_update(sku=my.inserted.sku)}, in_order=_ISSUE)


_ADD = _add()
_EARLIER = Statement(sa.update(crash_issues).where(*_OF_GROUP, _i.first_seen > _bind("first_seen")).values(
    first_seen=_bind("first_seen")))
_SET = Statement(sa.update(crash_issues).where(*_OF_GROUP).values(
    **{c: _bind(f"new_{c}") for c in _COLUMNS if c not in ("sku", "signature", "first_seen")}))
_HISTORY_COLUMNS = ("sku", "signature", "seq", "state", "build", "ignore_until", "ignore_count", "changed_at",
                    "changed_by")
_h = crash_issue_history.c
_ADD_HISTORY = insert(crash_issue_history, _HISTORY_COLUMNS)
_LAST_SEQ = Statement(sa.select(sa.func.coalesce(sa.func.max(_h.seq), 0)).where(
    _h.sku == _bind("sku"), _h.signature == _bind("signature")))
_HISTORY = Statement(sa.select(_h.state, _h.build, _h.ignore_until, _h.ignore_count, _h.changed_at, _h.changed_by)
                     .where(_h.sku == _bind("sku"), _h.signature == _bind("signature"))
                     .order_by(_h.seq.desc()).limit(_bind("limit")))
_r = reports.c
_OF_REPORTS = (_r.sku == _bind("sku"), _r.signature == _bind("signature"))
_REPORTS = Statement(sa.select(sa.func.count()).select_from(reports).where(*_OF_REPORTS))
_REPORTS_SINCE = Statement(sa.select(sa.func.count()).select_from(reports).where(
    *_OF_REPORTS, _r.received_at > _bind("since")))


def _newest(t: Transaction, at: int) -> bool:
    """Whether a run that read the window at `at` may tell it (IssueStore.told) or change an
    episode: no run that read it later did either first, unless that one's time is more than
    STALE_RUN_MS ahead (a clock far ahead, written over); if so, `at` is the newest from now on."""
    last = int(t.rows(_TOLD, {})[0][0])
    if at < last <= at + STALE_RUN_MS:
        return False
    if at != last:  # later, or a clock far ahead's, which would hold this one back once it came near
        t.execute(_TELL, {"at": at})
    return True


# within SQLite's 999 bound values before 3.32
_GROUPS_A_READ = 256


@functools.cache
def _counting(count: int) -> Statement:
    return Statement(sa.select(_i.signature).where(
        _i.sku == _bind("sku"), _i.signature.in_(marks("signature", count)), _i.state == "ignored",
        _i.ignore_count.is_not(None)))


def counting(sku: str, signatures: Sequence[str]) -> Query:
    """Those of these groups of the sku whose issue is ignored until a number of reports."""
    return _counting(padded(len(signatures))), {"sku": sku, **listed("signature", signatures)}


# a group's detail: its entries of the index that holds each one's build, player and receipt
GROUP_BUILDS = Statement(through(sa.select(_r.build_version, sa.func.count(), sa.func.min(_r.received_at),
                                           sa.func.max(_r.received_at), sa.func.count(sa.distinct(_r.player_id))),
                                 "reports_sku_signature_players").where(*_OF_REPORTS).group_by(_r.build_version))
GROUP_PLAYERS = Statement(through(sa.select(sa.func.count(sa.distinct(_r.player_id))),
                                  "reports_sku_signature_players").where(*_OF_REPORTS))
# the builds a statement of a window's group counts names: a range of (sku, build_version,
# received_at, signature) each, where the window of a sku's every report walked them all
GROUP_COUNT_BUILDS = 256


@functools.cache
def _group_counts(builds: int) -> Statement:
    return Statement(through(sa.select(_r.build_version, _r.signature, sa.func.count()), "reports_sku_build_received")
                     .where(_r.sku == _bind("sku"), _r.build_version.in_(marks("build", builds)),
                            _r.received_at >= _bind("from_ms"), _r.received_at < _bind("to_ms"),
                            _r.signature.is_not(None))
                     .group_by(_r.build_version, _r.signature).having(sa.func.count() >= _bind("at_least")))


def group_counts_queries(sku: str, builds: Sequence[str], from_ms: int, to_ms: int, at_least: int) -> list[Query]:
    """The reads of group_counts: the builds, each once, GROUP_COUNT_BUILDS a statement."""
    named = sorted(set(builds))
    chunks = (named[start:start + GROUP_COUNT_BUILDS] for start in range(0, len(named), GROUP_COUNT_BUILDS))
    return [(_group_counts(padded(len(chunk))), {"sku": sku, "from_ms": from_ms, "to_ms": to_ms,
                                                  "at_least": at_least, **listed("build", chunk)}) for chunk in chunks]


_g = crash_grouping_rules.c
_RULES = Statement(sa.select(_g.skip_globs, _g.join_globs, _g.version, _g.updated_at, _g.updated_by)
                   .where(_g.sku == _bind("sku")))
# a new sku's rules are version 1, each change after adds one
_SET_RULES = insert(crash_grouping_rules, ("sku", "skip_globs", "join_globs", "version", "updated_at", "updated_by"),
                    keys=("sku",), replace=("skip_globs", "join_globs", "updated_at", "updated_by"), add=("version",))
_m = crash_merges.c
_MERGES = Statement(sa.select(_m.signature, _m.into_signature, _m.merged_at, _m.merged_by)
                    .where(_m.sku == _bind("sku")))
_MERGE = Statement(sa.select(_m.into_signature, _m.merged_at, _m.merged_by)
                   .where(_m.sku == _bind("sku"), _m.signature == _bind("signature")))
_ADD_MERGE = insert(crash_merges, ("sku", "signature", "into_signature", "merged_at", "merged_by"))
_FOLLOW = Statement(sa.update(crash_merges).where(_m.sku == _bind("sku"), _m.into_signature == _bind("signature"))
                    .values(into_signature=_bind("into")))
_e = alert_episodes.c
_OPEN_EPISODE = insert(alert_episodes, ("episode_key", "kind", "opened_at"), keys=("episode_key",))
_EPISODES = Statement(sa.select(_e.episode_key, _e.kind, _e.opened_at).where(_e.kind == _bind("kind")))
_CLOSE_EPISODE = Statement(sa.delete(alert_episodes).where(_e.episode_key == _bind("episode_key"),
                                                           _e.opened_at == _bind("opened_at")))
_t = alert_tellers.c
# MySQL locks the row: runs changing episodes take turns
_TOLD = Statement(sa.select(_t.told_at).where(_t.id == 1).with_for_update())
_TELL = Statement(sa.update(alert_tellers).where(_t.id == 1).values(told_at=_bind("at")))
# a run this far behind the last change is taken for a clock far ahead, not for a stale run: its
# change goes ahead, so that a machine's wrong clock holds the others back no longer than this
STALE_RUN_MS = 600_000

_ALERT = ("alert_key", "kind", "created_at", "body")
_ADD_ALERT = insert(webhook_alerts, (*_ALERT, "sku"), keys=("alert_key",))
_a = webhook_alerts.c
_CLOSE_ALERT = Statement(sa.update(webhook_alerts).where(_a.alert_key == _bind("alert_key"))
                         .values(closed_at=_bind("closed_at")))
_w = webhooks.c
_WEBHOOK = ("name", "url", "secret", "kinds", "updated_at")
_ADD_WEBHOOK = insert(webhooks, _WEBHOOK, keys=("name",))
_REPLACE_WEBHOOK = Statement(sa.update(webhooks).where(_w.name == _bind("name")).values(
    {c: _bind(c) for c in ("url", "secret", "kinds", "updated_at")}))
_ALERT_KEYED = Statement(sa.select(webhook_alerts.c.alert_key).where(webhook_alerts.c.alert_key == _bind("key")))
_WEBHOOKS = Statement(sa.select(*(_w[c] for c in _WEBHOOK)).order_by(_w.name))
_DELETE_WEBHOOK = Statement(sa.delete(webhooks).where(_w.name == _bind("name")))
_d = webhook_deliveries.c
_DELIVERY = ("webhook", "alert_key", "status", "attempts", "next_attempt", "last_code", "last_error", "updated_at")
_DELETE_DELIVERIES = Statement(sa.delete(webhook_deliveries).where(_d.webhook == _bind("name")))
# an alert's deliveries: one to each webhook whose kinds (",a,b,") name it
_FAN_OUT = Statement(sa.insert(webhook_deliveries).from_select(_DELIVERY, sa.select(
    _w.name, _bind("alert_key"), sa.literal("pending"), sa.literal(0), _bind("now"), sa.null(), sa.null(),
    _bind("now")).where(_w.kinds.contains(_bind("kind")))))
_JOINED = sa.select(*(_d[c] for c in _DELIVERY), *(_a[c] for c in _ALERT)).join_from(
    webhook_deliveries, webhook_alerts, _d.alert_key == _a.alert_key)
# each due delivery's place among its webhook's, in turn
# a webhook's due deliveries: one tried before first, whose backoff the webhook's rest follows (one
# not tried yet would fail first and rest it for the first backoff again); then in the order of
# ports.issues.URGENCY, each rank in the order raised (a rest gives every delivery one due time)
_IN_TURN = (sa.case((_d.attempts > 0, 0), else_=1), sa.case(URGENCY, value=_a.kind, else_=len(URGENCY)),
            _a.created_at, _d.next_attempt, _d.alert_key)
# the webhooks resting after a failure (IssueStore.rest): the one that failed waits for its retry,
# and so does every delivery of theirs, also one raised since the rest
_RESTING = (sa.select(_d.webhook).where(_d.status == "pending", _d.attempts > 0, _d.next_attempt > _bind("now"))
            .distinct())
_TURNS = (sa.select(_d.webhook, _d.alert_key, sa.func.row_number().over(
    partition_by=_d.webhook, order_by=_IN_TURN).label("turn"))
    .join(webhook_alerts, _d.alert_key == _a.alert_key)
    .where(_d.status == "pending", _d.next_attempt <= _bind("now"), _d.webhook.not_in(_RESTING)).subquery())
_DUE = Statement(sa.select(*(_d[c] for c in _DELIVERY), *(_a[c] for c in _ALERT), *(_w[c] for c in _WEBHOOK))
                 .join_from(webhook_deliveries, _TURNS, sa.and_(_d.webhook == _TURNS.c.webhook,
                                                                 _d.alert_key == _TURNS.c.alert_key))
                 .join(webhook_alerts, _d.alert_key == _a.alert_key)
                 .join(webhooks, _d.webhook == _w.name)
                 .where(_TURNS.c.turn <= _bind("per_webhook"))
                 .order_by(*_IN_TURN).limit(_bind("limit")))
# the attempt the run claimed, unless another stored one since (the claim ran out): its outcome
# stands, unless this one delivered the alert and that one did not; a delivery is never replaced
_ATTEMPTED = Statement(sa.update(webhook_deliveries).where(
    _d.webhook == _bind("webhook"), _d.alert_key == _bind("alert_key"), _d.status != "delivered",
    sa.or_(_d.attempts == _bind("attempts") - 1,
           sa.and_(_bind("status") == "delivered", _d.attempts == _bind("attempts")))).values(
    status=_bind("status"), attempts=_bind("attempts"), next_attempt=_bind("next_attempt"),
    last_code=_bind("last_code"), last_error=_bind("last_error"), updated_at=_bind("updated_at")))
_CLAIM = Statement(sa.update(webhook_deliveries).where(
    _d.webhook == _bind("webhook"), _d.alert_key == _bind("alert_key"), _d.status == "pending",
    _d.next_attempt == _bind("next_attempt")).values(next_attempt=_bind("until"), updated_at=_bind("now")))
_REST = Statement(sa.update(webhook_deliveries).where(
    _d.webhook == _bind("webhook"), _d.status == "pending", _d.next_attempt < _bind("until")).values(
    next_attempt=_bind("until")))
# retention: an alert's deliveries, then the alert; PURGE_CHUNK a statement on MySQL (run each until
# it deletes fewer)
_PURGE_OUTBOX = (
    Statement(sa.delete(webhook_deliveries).where(_d.alert_key.in_(
        sa.select(_a.alert_key).where(_a.created_at < _bind("before")))).with_dialect_options(mysql_limit=PURGE_CHUNK)),
    purge(webhook_alerts, "created_at"),
    purge(announcements, "announced_at"),
)
_ANNOUNCE = insert(announcements, ("announcement_key", "announced_at"), keys=("announcement_key",))
_NEWEST = (_d.updated_at.desc(), _d.alert_key.desc())
_DELIVERIES = Statement(_JOINED.where(_d.webhook == _bind("webhook")).order_by(*_NEWEST).limit(_bind("limit")))
_DELIVERIES_BEFORE = Statement(_JOINED.where(
    _d.webhook == _bind("webhook"),
    sa.or_(_d.updated_at < _bind("updated_at"),
           sa.and_(_d.updated_at == _bind("updated_at"), _d.alert_key < _bind("alert_key"))),
).order_by(*_NEWEST).limit(_bind("limit")))


def _history(after: Any) -> Statement:
    """A page of a sku's alerts, newest first, each joined with its deliveries (none: a row of NULLs)."""
    page = sa.select(*(_a[c] for c in _ALERT), _a.closed_at).where(
        _a.sku == _bind("sku"), _a.created_at >= _bind("from_ms"), _a.created_at < _bind("to_ms"), after,
    ).order_by(_a.created_at.desc(), _a.alert_key.desc()).limit(_bind("limit")).subquery()
    return Statement(sa.select(page, *(_d[c] for c in _DELIVERY)).join_from(
        page, webhook_deliveries, _d.alert_key == page.c.alert_key, isouter=True,
    ).order_by(page.c.created_at.desc(), page.c.alert_key.desc(), _d.webhook))


# public: tests/integration/test_index_plans reads their plans
HISTORY_FIRST = _history(sa.true())
HISTORY_BEFORE = _history(sa.or_(_a.created_at < _bind("created_at"), sa.and_(
    _a.created_at == _bind("created_at"), _a.alert_key < _bind("alert_key"))))


def _issue(row: Sequence[Any]) -> Issue:
    sku, signature, state, build, until, count, episode, first, at, by, ignore_for, ignore_for_at = row
    # one a release before ignore_for left is another change's: the issue's counts as that release's did
    return Issue(str(sku), str(signature), cast(IssueState, str(state)), build, _int(until), _int(count),
                 int(episode), int(first), int(at), str(by), _int(ignore_for) if ignore_for_at == at else None)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _delivery(row: Sequence[Any]) -> Delivery:
    webhook, key, status, attempts, next_attempt, code, error, updated = row
    return Delivery(str(webhook), str(key), cast(DeliveryStatus, str(status)), int(attempts), int(next_attempt),
                    _int(code), error, int(updated))


def _alert(row: Sequence[Any]) -> Alert:
    key, kind, created, body = row
    return Alert(str(key), str(kind), int(created), json.loads(body))


def _webhook(row: Sequence[Any]) -> Webhook:
    name, url, secret, kinds, updated = row
    return Webhook(str(name), str(url), str(secret), tuple(k for k in str(kinds).split(",") if k), int(updated))


class SqlIssueStore:
    _database: SqlDatabase

    def __init__(self, database: SqlDatabase) -> None:
        self._database = database

    def observe(self, crashes: Sequence[Crash], now: int) -> list[Alert]:
        # a group moves at most once a batch (unresolved and regressed the consumer never moves), so
        # a spike of one group costs a statement or two, not two a crash
        by_group: dict[tuple[str, str], list[Crash]] = defaultdict(list)
        for crash in crashes:
            by_group[crash.sku, crash.signature].append(crash)
        raised: list[Alert] = []
        with self._database.transaction() as t:
            # one order for every consumer, so that two never wait on each other's rows
            for (sku, signature), group in sorted(by_group.items()):
                group.sort(key=lambda c: c.received_at)
                if t.execute(_ADD, vars(new_issue(group[0]))) == 1:
                    issue = new_issue(group[0])
                    _remember(t, issue)
                    raised += self._alert(t, issue_alert(issue, group[0]), now)
                    continue
                found = _issue(t.rows(_GET_FOR_UPDATE, {"sku": sku, "signature": signature})[0])
                for crash in group:
                    after = moved(found, crash, None)
                    if after is not None:
                        _store(t, after)
                        if after.state == "regressed":
                            raised += self._alert(t, issue_alert(after, crash), now)
                        break
        return raised

    def counted(self, crashes: Sequence[Crash]) -> None:
        latest: dict[tuple[str, str], Crash] = {}
        for crash in crashes:
            if (had := latest.get((crash.sku, crash.signature))) is None or crash.received_at > had.received_at:
                latest[crash.sku, crash.signature] = crash
        if not latest:
            return
        # a read a sku of the batch (a batch holds few): a group an ignore waits to count is rare
        of_sku: dict[str, list[str]] = defaultdict(list)
        for sku, signature in sorted(latest):
            of_sku[sku].append(signature)
        step = _GROUPS_A_READ
        due = sorted({(sku, str(found)) for sku, signatures in of_sku.items() for at in range(0, len(signatures), step)
                      for (found,) in self._database.rows(*counting(sku, signatures[at : at + step]))})

        def count(t: Transaction) -> None:
            for sku, signature in due:
                key = {"sku": sku, "signature": signature}
                found = _issue(t.rows(_GET_FOR_UPDATE, key)[0])
                if found.state != "ignored" or found.ignore_count is None:
                    continue  # changed since the read
                # the reports before the latest: the batch's others among them
                counting = (_REPORTS, key) if found.ignore_for is None else (
                    _REPORTS_SINCE, {**key, "since": found.changed_at})
                if (after := moved(found, latest[sku, signature], int(t.rows(*counting)[0][0]) - 1)) is not None:
                    _store(t, after)

        if due:
            self._database.in_transaction(count)

    def change(self, sku: str, signature: str, change: Change) -> Issue | None:
        key = {"sku": sku, "signature": signature}

        def changed(t: Transaction) -> Issue | None:
            found = t.rows(_GET_FOR_UPDATE, key)
            if not found:
                return None
            issue = _issue(found[0])
            count = None
            if change.ignore_for is not None:
                count = int(t.rows(_REPORTS, key)[0][0]) + change.ignore_for
            # stamped before its transaction: one that committed first with a later stamp is older still
            at = max(change.at, issue.changed_at + 1)
            after = Issue(sku, signature, change.state, change.build, change.ignore_until, count, issue.episode,
                          issue.first_seen, at, change.by, change.ignore_for)
            _store(t, after)
            return after

        # a request's, as set_rules and merge: run again if it lost a deadlock (SqlDatabase.in_transaction)
        return self._database.in_transaction(changed)

    def issue(self, sku: str, signature: str) -> Issue | None:
        found = self._database.rows(_GET, {"sku": sku, "signature": signature})
        return _issue(found[0]) if found else None

    def reports(self, sku: str, signature: str) -> list[BuildReports]:
        return [BuildReports(build, int(n), int(first), int(last), int(players)) for build, n, first, last, players
                in self._database.rows(GROUP_BUILDS, {"sku": sku, "signature": signature})]

    def players(self, sku: str, signature: str) -> int:
        return int(self._database.rows(GROUP_PLAYERS, {"sku": sku, "signature": signature})[0][0])

    def history(self, sku: str, signature: str, limit: int) -> list[Issue]:
        current = self.issue(sku, signature)
        if current is None:
            return []
        rows = self._database.rows(_HISTORY, {"sku": sku, "signature": signature, "limit": limit})
        return [Issue(sku, signature, cast(IssueState, str(state)), build, _int(until), _int(count), current.episode,
                      current.first_seen, int(at), str(by)) for state, build, until, count, at, by in rows]

    def group_counts(self, sku: str, builds: Sequence[str], from_ms: int, to_ms: int,
                     at_least: int) -> list[GroupCount]:
        return [GroupCount(str(build), str(signature), int(n))
                for query in group_counts_queries(sku, builds, from_ms, to_ms, at_least)
                for build, signature, n in self._database.rows(*query)]

    def grouping(self, sku: str) -> Grouping:
        with self._database.transaction() as t:
            return _grouping(t, sku)

    def merged_into(self, sku: str, signature: str) -> Merge | None:
        found = self._database.rows(_MERGE, {"sku": sku, "signature": signature})
        if not found:
            return None
        into, at, by = found[0]
        return Merge(signature, str(into), int(at), str(by))

    def set_rules(self, sku: str, skip: Sequence[str], join: Sequence[str], at: int, by: str) -> GroupingRules:
        def set_them(t: Transaction) -> GroupingRules:
            # unescaped: the longest lists the contract takes (crashes.grouping) then fit a TEXT's 64 KB
            t.execute(_SET_RULES, {"sku": sku, "skip_globs": json.dumps(list(skip), ensure_ascii=False),
                                   "join_globs": json.dumps(list(join), ensure_ascii=False), "version": 1,
                                   "updated_at": at, "updated_by": by})
            return _grouping(t, sku).rules

        return self._database.in_transaction(set_them)

    def merge(self, sku: str, signature: str, into: str, at: int, by: str) -> Merge | MergeRefusal:
        def merged(t: Transaction) -> Merge | MergeRefusal:
            # both rows locked, in one order, so a consumer moving either waits; merges at once may
            # still deadlock on the merges' own rows (the loser is run again: in_transaction)
            found = {s: t.rows(_GET_FOR_UPDATE, {"sku": sku, "signature": s}) for s in sorted({signature, into})}
            grouping = _grouping(t, sku)
            refusal = merge_refusal(grouping, signature, into, all(found.values()))
            if refusal is not None:
                return refusal
            if (made := grouping.merges.get(signature)) is not None:
                return made
            merge = Merge(signature, str(grouping.group(into)), at, by)
            t.execute(_ADD_MERGE, {"sku": sku, "signature": signature, "into_signature": merge.into,
                                   "merged_at": at, "merged_by": by})
            t.execute(_FOLLOW, {"sku": sku, "signature": signature, "into": merge.into})
            t.execute(_EARLIER, {"sku": sku, "signature": merge.into,
                                 "first_seen": _issue(found[signature][0]).first_seen})
            return merge

        return self._database.in_transaction(merged)

    def regrouped(self, crashes: Sequence[Crash]) -> None:
        earliest: dict[tuple[str, str], Crash] = {}
        for crash in crashes:
            known = earliest.get((crash.sku, crash.signature))
            if known is None or crash.received_at < known.received_at:
                earliest[crash.sku, crash.signature] = crash
        with self._database.transaction() as t:
            for _, crash in sorted(earliest.items()):
                issue = new_issue(crash)
                if t.execute(_ADD, vars(issue)) == 1:
                    _remember(t, issue)
                else:
                    t.execute(_EARLIER, {"sku": crash.sku, "signature": crash.signature,
                                         "first_seen": crash.received_at})

    def episodes(self, kind: str) -> list[Episode]:
        return [Episode(str(key), str(k), int(at)) for key, k, at in self._database.rows(_EPISODES, {"kind": kind})]

    def open_episode(self, episode: Episode, alert: Alert) -> bool:
        # the episode's key is unique: of two runs opening it at once, one inserts the row (and the
        # alert, in the same transaction), the other inserts nothing
        with self._database.transaction() as t:
            opening = {"episode_key": episode.key, "kind": episode.kind, "opened_at": episode.opened_at}
            if not _newest(t, episode.opened_at) or t.execute(_OPEN_EPISODE, opening) != 1:
                return False
            self._alert(t, alert, episode.opened_at)
            return True

    def told(self, at: int) -> bool:
        return self._database.in_transaction(lambda t: _newest(t, at))

    def close_episode(self, episode: Episode, at: int) -> bool:
        with self._database.transaction() as t:
            closing = {"episode_key": episode.key, "opened_at": episode.opened_at}
            if not _newest(t, at) or t.execute(_CLOSE_EPISODE, closing) != 1:
                return False
            t.execute(_CLOSE_ALERT, {"alert_key": episode.alert_key, "closed_at": at})
            return True

    def alert_history(self, sku: str, from_ms: int, to_ms: int, before: tuple[int, str] | None,
                      limit: int) -> list[RaisedAlert]:
        values: dict[str, Any] = {"sku": sku, "from_ms": from_ms, "to_ms": to_ms, "limit": limit}
        if before is None:
            rows = self._database.rows(HISTORY_FIRST, values)
        else:
            rows = self._database.rows(HISTORY_BEFORE, {**values, "created_at": before[0], "alert_key": before[1]})
        n = len(_ALERT)
        found: dict[str, RaisedAlert] = {}
        for row in rows:
            alert = found.get(str(row[0])) or RaisedAlert(_alert(row[:n]), _int(row[n]), ())
            delivered = () if row[n + 1] is None else (_delivery(row[n + 1:]),)
            found[alert.alert.key] = replace(alert, deliveries=alert.deliveries + delivered)
        return list(found.values())

    def raise_alert(self, alert: Alert) -> bool:
        with self._database.transaction() as t:
            return bool(self._alert(t, alert, alert.created_at))

    def raised(self, key: str) -> bool:
        return bool(self._database.rows(_ALERT_KEYED, {"key": key}))

    @staticmethod
    def _alert(t: Transaction, alert: Alert, now: int) -> list[Alert]:
        sku = alert.body.get("sku")
        if t.execute(_ADD_ALERT, {"alert_key": alert.key, "kind": alert.kind, "created_at": alert.created_at,
                                  "body": json.dumps(alert.body, separators=(",", ":")),
                                  "sku": sku if isinstance(sku, str) else None}) != 1:
            return []
        t.execute(_FAN_OUT, {"alert_key": alert.key, "now": now, "kind": f",{alert.kind},"})
        return [alert]

    def put_webhook(self, webhook: Webhook) -> bool:
        values = {"name": webhook.name, "url": webhook.url, "secret": webhook.secret,
                  "kinds": f",{','.join(webhook.kinds)},", "updated_at": webhook.updated_at}

        def put(t: Transaction) -> bool:
            # added unless taken, then replaced: the insert says which, also of several at once (a
            # read before it would not: two would both find none)
            if t.execute(_ADD_WEBHOOK, values) == 1:
                return True
            t.execute(_REPLACE_WEBHOOK, values)
            return False

        return self._database.in_transaction(put)

    def webhooks(self) -> list[Webhook]:
        return [_webhook(row) for row in self._database.rows(_WEBHOOKS, {})]

    def delete_webhook(self, name: str) -> bool:
        with self._database.transaction() as t:
            t.execute(_DELETE_DELIVERIES, {"name": name})
            return t.execute(_DELETE_WEBHOOK, {"name": name}) > 0

    def due(self, now: int, limit: int, per_webhook: int | None = None) -> list[tuple[Delivery, Alert, Webhook]]:
        rows = self._database.rows(_DUE, {"now": now, "limit": limit, "per_webhook": per_webhook or limit})
        n, m = len(_DELIVERY), len(_DELIVERY) + len(_ALERT)
        return [(_delivery(row[:n]), _alert(row[n:m]), _webhook(row[m:])) for row in rows]

    def claim(self, delivery: Delivery, until: int, now: int) -> bool:
        with self._database.transaction() as t:
            return t.execute(_CLAIM, {"webhook": delivery.webhook, "alert_key": delivery.alert_key,
                                      "next_attempt": delivery.next_attempt, "until": until, "now": now}) == 1

    def attempted(self, delivery: Delivery) -> bool:
        with self._database.transaction() as t:
            return t.execute(_ATTEMPTED, vars(delivery)) == 1

    def announce(self, key: str, at: int) -> bool:
        with self._database.transaction() as t:
            return t.execute(_ANNOUNCE, {"announcement_key": key, "announced_at": at}) == 1

    def purge(self, before_ms: int) -> int:
        return sum(self._database.delete_in_chunks(statement, {"before": before_ms}) for statement in _PURGE_OUTBOX)

    def rest(self, webhook: str, until: int) -> None:
        with self._database.transaction() as t:
            t.execute(_REST, {"webhook": webhook, "until": until})

    def deliveries(self, webhook: str, before: tuple[int, str] | None, limit: int) -> list[tuple[Delivery, Alert]]:
        if before is None:
            rows = self._database.rows(_DELIVERIES, {"webhook": webhook, "limit": limit})
        else:
            rows = self._database.rows(_DELIVERIES_BEFORE, {"webhook": webhook, "updated_at": before[0],
                                                            "alert_key": before[1], "limit": limit})
        n = len(_DELIVERY)
        return [(_delivery(row[:n]), _alert(row[n:])) for row in rows]

    def close(self) -> None:
        self._database.close()


def _grouping(t: Transaction, sku: str) -> Grouping:
    key = {"sku": sku}
    found = t.rows(_RULES, key)
    rules = GroupingRules()
    if found:
        skip, join, version, at, by = found[0]
        rules = GroupingRules(tuple(json.loads(skip)), tuple(json.loads(join)), int(version), int(at), str(by))
    merges = {str(s): Merge(str(s), str(into), int(at), str(by)) for s, into, at, by in t.rows(_MERGES, key)}
    return Grouping(rules, merges)


def _store(t: Transaction, issue: Issue) -> None:
    t.execute(_SET, {"sku": issue.sku, "signature": issue.signature,
                     **{f"new_{k}": v for k, v in vars(issue).items() if k not in ("sku", "signature", "first_seen")},
                     "new_ignore_for_at": None if issue.ignore_for is None else issue.changed_at})
    _remember(t, issue)


def _remember(t: Transaction, issue: Issue) -> None:
    key = {"sku": issue.sku, "signature": issue.signature}
    seq = int(t.rows(_LAST_SEQ, key)[0][0]) + 1
    t.execute_rows(_ADD_HISTORY, [(issue.sku, issue.signature, seq, issue.state, issue.build, issue.ignore_until,
                                   issue.ignore_count, issue.changed_at, issue.changed_by)])

