"""Sessions that carry their outcome, from /v1/sessions and from a Sentry SDK, into release health's
counts; and records of sessions without a build stay as they were (their body hash with them)."""

from __future__ import annotations

import json
from typing import Any

from adapters.factory import Adapters
from ports.releases import DAY_MS, Outcome
from ports.telemetry import logger
from reporters.capture import capture_envelope
from reporters.sentry import parse_envelope
from sessions.capture import capture_sessions
from sessions.counting import count_sessions
from sessions.model import SessionCount, SessionEvent, sessions_json
from tests.unit.test_correlation import Lines

SKU = "skyrift:pc"
EVER = (0, 2**62)


def count(adapters: Adapters) -> None:
    count_sessions(adapters.log.consumer("test", "sessions").poll(100, 1 << 30, 0.1), adapters.counters,
                   adapters.log)


def outcomes(adapters: Adapters, build: str) -> dict[Outcome, int]:
    return adapters.counters.release_sessions(SKU, build, *EVER, 2**61).get(0, {})


def players(adapters: Adapters, build: str, crashed: bool) -> int:
    return adapters.counters.players(SKU, build, 0, 2**62 // DAY_MS * DAY_MS, crashed)


def test_a_record_of_no_build_is_the_one_sessions_always_had() -> None:
    assert sessions_json([SessionCount(sku=SKU, kind="client"), SessionCount(sku=SKU, kind="server", count=3)]) \
        == b'[{"sku":"skyrift:pc","kind":"client"},{"sku":"skyrift:pc","kind":"server","count":3}]'


def test_posted_sessions_count_by_build_outcome_and_player(adapters: Adapters) -> None:
    events = [SessionEvent.model_validate(e) for e in (
        {"sku": SKU, "kind": "client", "buildVersion": "1.4.3", "playerId": "a", "status": "crashed"},
        {"sku": SKU, "kind": "client", "buildVersion": "1.4.3", "playerId": "a"},
        {"sku": SKU, "kind": "client", "buildVersion": "1.4.3", "playerId": "b", "status": "abnormal"},
        {"sku": SKU, "kind": "server", "playerId": "c"},  # no build: the sku's sessions alone
    )]
    capture_sessions(adapters.log, adapters.spill, events)
    [record] = adapters.log.consumer("peek", "sessions").poll(10, 1 << 20, 0.1)
    assert json.loads(record.value)["sessions"][3] == {"sku": SKU, "kind": "server"}
    count(adapters)
    assert outcomes(adapters, "1.4.3") == {"crashed": 1, "ok": 1, "abnormal": 1}
    assert (players(adapters, "1.4.3", False), players(adapters, "1.4.3", True)) == (2, 1)
    assert sum(adapters.counters.session_counts(SKU, *EVER, 2**61).values()) == 4


def test_a_sentry_upload_counts_its_sessions_by_release_did_and_status(adapters: Adapters) -> None:
    opened = [{"sid": f"00000000-0000-4000-8000-00000000000{i}", "init": True, "started": "2026-11-24T05:00:00Z",
               "status": status, "did": did, "errors": errors, "attrs": {"release": release}}
              for i, (status, did, errors, release) in enumerate([
                  ("exited", "p1", 0, "game@2.0"), ("crashed", "p2", 0, "game@2.0"),
                  ("exited", "p3", 2, "game@2.0"), ("abnormal", "p4", 0, "a/b"),  # a release no route names: no build
              ])]
    body = b"{}\n" + b"".join(b'{"type":"session"}\n' + json.dumps(s).encode() + b"\n" for s in opened)
    aggregate = json.dumps({"attrs": {"release": "game@2.0"}, "aggregates": [
        {"started": "2026-11-24T05:00:00Z", "did": "p5", "exited": 3, "crashed": 2, "abnormal": 1}]}).encode()
    body += b'{"type":"sessions"}\n' + aggregate + b"\n"
    for _ in range(2):  # the ended sessions sent again are counted once; aggregates each time
        capture_envelope(adapters.log, adapters.spill, parse_envelope(body, SKU), SKU)
    count(adapters)
    assert outcomes(adapters, "game@2.0") == {"ok": 1 + 6, "crashed": 1 + 4, "errored": 1, "abnormal": 2}
    assert (players(adapters, "game@2.0", False), players(adapters, "game@2.0", True)) == (4, 2)
    assert adapters.counters.build(SKU, "a/b") is None
    assert sum(adapters.counters.session_counts(SKU, *EVER, 2**61).values()) == 4 + 2 * 6


def test_a_session_that_crashed_after_it_was_sent_opened_counts_once_crashed(adapters: Adapters) -> None:
    # found from outside: a session counted as its first update said, and what came after changed
    # nothing. A native SDK (sentry-native, Unity, Unreal) sends a session opened and healthy when the
    # game starts, and how it ended (here its crash) when it can: crash-free sessions were never less
    def update(**fields: object) -> bytes:
        session = {"sid": "5e1c5cbf-3c5b-4f0a-9d7c-0c1c2d3e4f50", "started": "2026-11-24T05:00:00Z", "did": "p1",
                   "attrs": {"release": "game@2.0"}, **fields}
        return b'{}\n{"type":"session"}\n' + json.dumps(session).encode() + b"\n"

    for body in (update(init=True, status="ok"), update(status="ok", errors=1), update(status="crashed", errors=2)):
        capture_envelope(adapters.log, adapters.spill, parse_envelope(body, SKU), SKU)
    count(adapters)
    assert outcomes(adapters, "game@2.0") == {"crashed": 1}
    assert (players(adapters, "game@2.0", False), players(adapters, "game@2.0", True)) == (1, 1)


def test_a_client_s_idempotency_key_is_never_a_sentry_session_s(adapters: Adapters) -> None:
    # found from outside: a Sentry session's key was `sentry-session-end:{sid}` among the keys
    # clients send to /v1/sessions, so a client's key of that shape made one of them a retry
    sid = "5e1c5cbf-3c5b-4f0a-9d7c-0c1c2d3e4f50"
    capture_sessions(adapters.log, adapters.spill, [SessionEvent(sku=SKU, kind="client", buildVersion="2.0",
                                                                 status="crashed")],
                     idempotency_key=f"sentry-session-end:{sid}")
    body = b'{}\n{"type":"session"}\n' + json.dumps({"sid": sid, "status": "crashed", "started": "2026-11-24T05:00:00Z",
                                                     "attrs": {"release": "2.0"}}).encode() + b"\n"
    capture_envelope(adapters.log, adapters.spill, parse_envelope(body, SKU), SKU)
    count(adapters)
    assert outcomes(adapters, "2.0") == {"crashed": 2}


def test_an_upload_s_sessions_are_counted_by_sid_against_its_limit(adapters: Adapters) -> None:
    # found from outside: the same sid ended 51 times beside an aggregate of 450 was 501 sessions, and refused
    aggregate = json.dumps({"attrs": {"release": "2.0"}, "aggregates": [
        {"started": "2026-11-24T05:00:00Z", "exited": 450}]}).encode()
    ended = json.dumps({"sid": "s1", "status": "exited", "started": "2026-11-24T05:00:00Z",
                        "attrs": {"release": "2.0"}}).encode()
    body = b'{}\n{"type":"sessions"}\n' + aggregate + b"\n" + b'{"type":"session"}\n' + ended + b"\n"
    body += (b'{"type":"session"}\n' + ended + b"\n") * 50
    capture_envelope(adapters.log, adapters.spill, parse_envelope(body, SKU), SKU)
    count(adapters)
    assert outcomes(adapters, "2.0") == {"ok": 451}


def not_kept(adapters: Adapters, body: bytes) -> list[dict[str, Any]]:
    """The "envelope items not kept" lines capturing `body` logged."""
    lines = Lines()
    logger.addHandler(lines)
    try:
        capture_envelope(adapters.log, adapters.spill, parse_envelope(body, SKU), SKU)
    finally:
        logger.removeHandler(lines)
    return [line for line in lines.lines if line["message"] == "envelope items not kept"]


def test_what_an_envelope_carried_and_was_not_kept_is_logged(adapters: Adapters) -> None:
    """Found from outside: an unreadable session, a transaction or a lone file was answered 200 and
    left no trace anywhere (rule 5: nothing is dropped silently)."""
    body = b"\n".join([b"{}", b'{"type":"session"}', b'{"sid":"abc","status":"crashed"}',
                       b'{"type":"transaction"}', b'{"spans":[]}',
                       b'{"type":"attachment","filename":"a.log"}', b"log", b""])
    [line] = not_kept(adapters, body)
    assert line["discarded"] == {"session": 1, "transaction": 1, "attachment": 1} and line["sku"] == SKU


def test_an_envelope_that_left_nothing_out_logs_nothing_left_out(adapters: Adapters) -> None:
    """Found from outside: every event's envelope logged "envelope items not kept" with
    `{"attachment": 0}`, one misleading line a crash in CloudWatch."""
    assert not_kept(adapters, b'{}\n{"type":"event"}\n{"message":"kept whole"}\n') == []
