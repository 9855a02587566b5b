from __future__ import annotations

import time
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crashes.model import MAX_ATTACHMENTS, MAX_INDEXED_CHARS
from ports import CrashIndex, IndexEntry, Processed, ReportFilter, ReportOrigin, SkuSeen
from ports.timeutil import now_ms


def entry(n: int, sku: str = "game:pc", received_at: int = 1_000_000, **fields) -> IndexEntry:
    fields.setdefault("report_key", f"{n:032x}")
    return IndexEntry(event_id=f"event-{n}", sku=sku, received_at=received_at, size_bytes=100 + n, **fields)


def test_insert_assigns_increasing_ids_and_keeps_every_field(crash_index: CrashIndex):
    e = entry(1, crash_type="AV", error_code="5", platform="ps5", build_version="1.2", signature="abc",
              attachments=("a.png", "log.txt"))
    crash_index.insert_many([e, entry(2)])
    first, second = crash_index.find(ReportFilter(sku="game:pc", limit=10))
    assert first.entry == e
    assert second.report_id > first.report_id
    assert crash_index.get(first.report_id) == first
    assert first.submit_time > 0


def test_the_most_attachment_names_capture_takes_are_kept(crash_index: CrashIndex):
    """Found from outside: 64 names of 128 letters outside the BMP, escaped in the column's JSON
    as 12 bytes each, overflowed MySQL's TEXT, and the accepted report went to the dead letters."""
    letters = "\U00020000" * 126
    names = tuple(f"{letters}{n:02}" for n in range(MAX_ATTACHMENTS))
    e = entry(1, attachments=names)
    crash_index.insert_many([e])
    [found] = crash_index.find(ReportFilter(sku="game:pc", limit=10))
    assert found.entry == e


def test_insert_is_idempotent_by_report_key(crash_index: CrashIndex):
    crash_index.insert_many([entry(1), entry(2)])
    crash_index.insert_many([entry(2), entry(3)])
    reports = crash_index.find(ReportFilter(sku="game:pc", limit=10))
    assert [r.entry.event_id for r in reports] == ["event-1", "event-2", "event-3"]


def test_insert_returns_the_entries_it_indexed(crash_index: CrashIndex):
    """What a redelivered batch persisted anew: none of what was indexed before it, and of a key
    twice in one call, the first."""
    assert crash_index.insert_many([entry(1), entry(2)]) == [entry(1), entry(2)]
    assert crash_index.insert_many([entry(2), entry(3), entry(3, sku="other")]) == [entry(3)]
    assert crash_index.insert_many([entry(1)]) == crash_index.insert_many([]) == []


def test_body_hashes_are_those_of_the_first_insert(crash_index: CrashIndex):
    assert crash_index.body_hashes([]) == {}
    crash_index.insert_many([entry(1), entry(2)], {entry(1).report_key: "a" * 64})
    crash_index.insert_many([entry(1), entry(3)], {entry(1).report_key: "b" * 64, entry(3).report_key: "c" * 64})
    keys = [entry(n).report_key for n in range(5)]
    assert crash_index.body_hashes(keys) == {keys[1]: "a" * 64, keys[2]: None, keys[3]: "c" * 64}


def test_origins_are_those_of_the_indexed_keys(crash_index: CrashIndex):
    assert crash_index.origins([]) == {}
    crash_index.insert_many([entry(1, build_version="1.2"), entry(2, sku="ember:ps5", received_at=7)])
    crash_index.insert_many([entry(2, sku="game:pc")])  # indexed already: stays as it was
    keys = [entry(n).report_key for n in range(4)]
    assert crash_index.origins(keys) == {keys[1]: ReportOrigin("game:pc", "1.2", 1_000_000),
                                         keys[2]: ReportOrigin("ember:ps5", None, 7)}


def test_find_pages_with_after_id_and_offset(crash_index: CrashIndex):
    crash_index.insert_many([entry(n) for n in range(10)])
    all_ids = [r.report_id for r in crash_index.find(ReportFilter(sku="game:pc", limit=100))]
    assert [r.report_id for r in crash_index.find(ReportFilter(sku="game:pc", limit=3, after_id=all_ids[4]))] == \
        all_ids[5:8]
    assert [r.report_id for r in crash_index.find(ReportFilter(sku="game:pc", limit=3, offset=8))] == all_ids[8:]


def test_find_pages_newest_first(crash_index: CrashIndex):
    crash_index.insert_many([entry(n) for n in range(10)])
    all_ids = [r.report_id for r in crash_index.find(ReportFilter(sku="game:pc", limit=100))]
    newest = ReportFilter(sku="game:pc", limit=3, newest_first=True)
    assert [r.report_id for r in crash_index.find(newest)] == all_ids[:-4:-1]
    after = ReportFilter(sku="game:pc", limit=3, after_id=all_ids[4], newest_first=True)
    assert [r.report_id for r in crash_index.find(after)] == all_ids[3::-1][:3]
    skipped = ReportFilter(sku="game:pc", limit=3, offset=8, newest_first=True)
    assert [r.report_id for r in crash_index.find(skipped)] == all_ids[1::-1]


# a few values each, so filters match some reports and not others
_reports = st.fixed_dictionaries({"platform": st.sampled_from(["ps5", "pc", None]),
                                  "crash_type": st.sampled_from(["AV", "OOM"])})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.lists(_reports, max_size=25), arriving=st.lists(st.lists(_reports, max_size=4), max_size=6),
       limit=st.integers(1, 7), newest_first=st.booleans(),
       equals=st.sampled_from([{}, {"platform": "ps5"}, {"platform": "pc", "crash_type": "AV"}]))
def test_keyset_pages_match_brute_force_while_reports_arrive(crash_index: CrashIndex, first, arriving, limit,
                                                             newest_first, equals):
    """Paged by cursor in either order while new reports are indexed between pages, each report is
    listed once and none is skipped: oldest first ends with the newest, newest first with the
    oldest of those there when it began."""
    sku = f"s{uuid.uuid4().hex[:8]}"  # a sku per example: the index is shared by examples
    keys = iter(range(10**6))
    brute: list[dict[str, str | None]] = []  # what was inserted, in order, as the filtered fields

    def insert(reports: list[dict[str, str | None]]) -> None:
        crash_index.insert_many([IndexEntry(report_key=uuid.uuid4().hex, event_id=f"{sku}-{next(keys)}", sku=sku,
                                            received_at=1, size_bytes=1, **fields) for fields in reports])
        brute.extend(reports)

    def matching() -> list[str]:
        return [f"{sku}-{n}" for n, fields in enumerate(brute) if all(fields[k] == v for k, v in equals.items())]

    insert(first)
    there_at_start = matching()
    listed: list[str] = []
    after: int | None = None
    pending = iter(arriving)
    while True:
        page = crash_index.find(ReportFilter(sku=sku, limit=limit, after_id=after, equals=equals,
                                             newest_first=newest_first))
        listed += [r.entry.event_id for r in page]
        if len(page) < limit:
            break
        after = page[-1].report_id
        insert(next(pending, []))
    assert listed == (there_at_start[::-1] if newest_first else matching())


def test_find_filters_by_sku_time_and_fields(crash_index: CrashIndex):
    crash_index.insert_many([entry(1, platform="ps5"), entry(2, platform="pc"), entry(3, sku="other", platform="ps5")])
    reports = crash_index.find(ReportFilter(sku="game:pc", limit=10, equals={"platform": "ps5"}))
    assert [r.entry.event_id for r in reports] == ["event-1"]
    submit = reports[0].submit_time
    assert crash_index.find(ReportFilter(sku="game:pc", limit=10, from_ms=submit + 10_000)) == []
    assert len(crash_index.find(ReportFilter(sku="game:pc", limit=10, from_ms=submit, to_ms=submit + 10_000))) == 2
    assert crash_index.find(ReportFilter(sku="game:pc", limit=10, to_ms=submit)) == []


def test_get_missing_is_none(crash_index: CrashIndex):
    assert crash_index.get(12345) is None


def test_crash_counts_by_bucket_of_received_at(crash_index: CrashIndex):
    minute = 60_000
    crash_index.insert_many([
        entry(1, received_at=10 * minute), entry(2, received_at=10 * minute + 59_999),
        entry(3, received_at=11 * minute), entry(4, received_at=12 * minute),
        entry(5, sku="x", received_at=10 * minute),
    ])
    assert crash_index.crash_counts("game:pc", 10 * minute, 12 * minute, minute) == {10 * minute: 2, 11 * minute: 1}
    assert crash_index.crash_counts("game:pc", 0, 60 * minute, 60 * minute) == {0: 4}
    crash_index.ping()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reports=st.lists(st.tuples(st.integers(0, 5), _reports), max_size=30),
       equals=st.sampled_from([{}, {"platform": "ps5"}, {"platform": "pc", "crash_type": "AV"}]))
def test_crash_counts_narrowed_by_fields_match_brute_force(crash_index: CrashIndex, reports, equals):
    minute, sku = 60_000, f"g:{uuid.uuid4().hex[:8]}"  # the index outlives each example
    crash_index.insert_many([entry(n, sku=sku, received_at=m * minute + n, report_key=f"{sku}{n}", **fields)
                             for n, (m, fields) in enumerate(reports)])
    expected: dict[int, int] = {}
    for m, fields in reports:
        if all(fields.get(name) == value for name, value in equals.items()):
            expected[m * minute] = expected.get(m * minute, 0) + 1
    assert crash_index.crash_counts(sku, 0, 6 * minute, minute, equals) == expected


def test_the_longest_indexed_values_capture_accepts_round_trip(crash_index: CrashIndex):
    long = "é" * MAX_INDEXED_CHARS  # characters, not bytes: two bytes each in UTF-8
    e = entry(1, crash_type=long, error_code=long, platform=long, build_version=long)
    crash_index.insert_many([e])
    [found] = crash_index.find(ReportFilter(sku="game:pc", limit=10, equals={"platform": long}))
    assert found.entry == e


def test_crash_groups_by_signature_largest_first(crash_index: CrashIndex):
    crash_index.insert_many([
        entry(1, signature="b", received_at=1000), entry(2, signature="a", received_at=2000),
        entry(3, signature="a", received_at=500), entry(4, signature=None, received_at=700),
        entry(5, signature="c", received_at=900), entry(6, sku="other", signature="a", received_at=800),
        entry(7, signature="a", received_at=99_999),
    ])
    ids = {r.entry.event_id: r.report_id for r in crash_index.find(ReportFilter(sku="game:pc", limit=10))}
    groups = crash_index.crash_groups("game:pc", 0, 10_000, 10)
    assert [(g.signature, g.count, g.first_seen, g.last_seen) for g in groups] == [
        ("a", 2, 500, 2000), ("b", 1, 1000, 1000), ("c", 1, 900, 900)]
    assert groups[0].sample_report_id == min(ids["event-2"], ids["event-3"])
    assert [g.signature for g in crash_index.crash_groups("game:pc", 0, 10_000, 2)] == ["a", "b"]


def test_crash_groups_narrowed_by_report_fields(crash_index: CrashIndex):
    crash_index.insert_many([
        entry(1, signature="a", platform="ps5", build_version="1.0"),
        entry(2, signature="a", platform="pc", build_version="1.0"),
        entry(3, signature="a", platform="ps5", build_version="1.1", crash_type="OOM"),
        entry(4, signature="b", platform="pc", build_version="1.1", error_code="7"),
    ])
    ids = {r.entry.event_id: r.report_id for r in crash_index.find(ReportFilter(sku="game:pc", limit=10))}

    def groups(**equals: str) -> list[tuple[str, int, int]]:
        found = crash_index.crash_groups("game:pc", 0, 10**7, 10, equals)
        return [(g.signature, g.count, g.sample_report_id) for g in found]

    assert groups() == [("a", 3, ids["event-1"]), ("b", 1, ids["event-4"])]
    assert groups(platform="ps5") == [("a", 2, ids["event-1"])]
    assert groups(platform="pc") == [("a", 1, ids["event-2"]), ("b", 1, ids["event-4"])]
    assert groups(build_version="1.1", crash_type="OOM") == [("a", 1, ids["event-3"])]
    assert groups(error_code="7") == [("b", 1, ids["event-4"])]
    assert groups(platform="xbox") == []


def test_skus_by_name_with_their_last_report(crash_index: CrashIndex):
    assert crash_index.skus("", 10) == []
    crash_index.insert_many([entry(1, sku="b:pc", received_at=50), entry(2, sku="a:pc", received_at=70),
                             entry(3, sku="b:pc", received_at=90), entry(4, sku="b:pc", received_at=20),
                             entry(5, sku="c", received_at=10)])
    assert crash_index.skus("", 10) == [SkuSeen("a:pc", 70), SkuSeen("b:pc", 90), SkuSeen("c", 10)]
    assert crash_index.skus("", 2) == [SkuSeen("a:pc", 70), SkuSeen("b:pc", 90)]
    assert crash_index.skus("a:pc", 10) == [SkuSeen("b:pc", 90), SkuSeen("c", 10)]
    assert crash_index.skus("c", 10) == []


def test_purge_drops_reports_submitted_before_the_cut_and_nothing_after(crash_index: CrashIndex):
    crash_index.insert_many([entry(n, signature="s") for n in range(3)])
    time.sleep(0.01)
    cut = now_ms()
    time.sleep(0.01)
    crash_index.insert_many([entry(n, signature="s") for n in range(3, 5)])
    assert crash_index.purge(cut) == 3
    kept = crash_index.find(ReportFilter(sku="game:pc", limit=10))
    assert [r.entry.event_id for r in kept] == ["event-3", "event-4"]
    assert crash_index.crash_groups("game:pc", 0, 2_000_000, 10)[0].count == 2
    keys = [entry(n).report_key for n in range(5)]
    assert {key: o.sku for key, o in crash_index.origins(keys).items()} == dict.fromkeys(keys[3:], "game:pc")
    assert crash_index.purge(cut) == 0
    # a purged report that comes again is a new report, after the ones kept
    crash_index.insert_many([entry(0)])
    again = crash_index.find(ReportFilter(sku="game:pc", limit=10))
    assert [r.entry.event_id for r in again] == ["event-3", "event-4", "event-0"]
    assert again[-1].report_id > kept[-1].report_id


def test_purge_of_everything_leaves_an_index_that_takes_new_reports(crash_index: CrashIndex):
    crash_index.insert_many([entry(n) for n in range(4)])
    highest = crash_index.find(ReportFilter(sku="game:pc", limit=10))[-1].report_id
    assert crash_index.purge(now_ms() + 3 * 86_400_000) == 4  # days ahead: whole partitions go
    assert crash_index.find(ReportFilter(sku="game:pc", limit=10)) == []
    crash_index.insert_many([entry(1), entry(9)])
    assert [r.report_id > highest for r in crash_index.find(ReportFilter(sku="game:pc", limit=10))] == [True, True]


def test_a_walk_sets_state_and_signature_and_names_a_crash_only_where_none_was(crash_index: CrashIndex):
    crash_index.insert_many([
        entry(1, crash_type="minidump", signature="client", processing="pending"),
        entry(2, crash_type="EXCEPTION_STACK_OVERFLOW", processing="pending"),
        entry(3, processing="pending"),
        entry(4, signature="client", processing="pending"),
    ])
    crash_index.processed([
        Processed(entry(1).report_key, "processed", signature="walked", crash_type="SIGSEGV"),
        Processed(entry(2).report_key, "processed", signature="walked", crash_type="SIGSEGV"),
        Processed(entry(3).report_key, "processed", crash_type=None),
        # a failed walk names nothing, and the client's signature stays
        Processed(entry(4).report_key, "failed"),
        Processed(f"{99:032x}", "processed", signature="gone"),  # not indexed (purged): passed over
    ])
    found = {r.entry.event_id: r.entry for r in crash_index.find(ReportFilter(sku="game:pc", limit=10))}
    assert (found["event-1"].processing, found["event-1"].signature, found["event-1"].crash_type) == \
        ("processed", "walked", "SIGSEGV")
    assert (found["event-2"].signature, found["event-2"].crash_type) == ("walked", "EXCEPTION_STACK_OVERFLOW")
    assert (found["event-3"].processing, found["event-3"].signature, found["event-3"].crash_type) == \
        ("processed", None, None)
    assert (found["event-4"].processing, found["event-4"].signature) == ("failed", "client")
    assert len(found) == 4


def test_what_a_report_awaits_is_what_its_last_walk_lacked(crash_index: CrashIndex):
    libc, game = "libc.so.6/AB/libc.so.6.sym", "game/CD/game.sym"
    crash_index.insert_many([entry(n, processing="pending") for n in range(1, 5)])
    crash_index.processed([Processed(entry(n).report_key, "processed", missing_symbols=(libc, game), at=n)
                           for n in range(1, 4)])
    keys = [entry(n).report_key for n in range(1, 4)]
    assert crash_index.awaiting_symbols(game, "", 10) == keys
    # paged by key
    assert crash_index.awaiting_symbols(game, "", 2) == keys[:2]
    assert crash_index.awaiting_symbols(game, keys[1], 2) == keys[2:]
    # walked again with the game's symbols: it awaits libc's alone, and the same again changes nothing
    again = Processed(keys[0], "processed", missing_symbols=(libc,), at=5)
    crash_index.processed([again])
    crash_index.processed([again])
    assert crash_index.awaiting_symbols(game, "", 10) == keys[1:]
    assert crash_index.awaiting_symbols(libc, "", 10) == keys
    assert crash_index.awaiting_symbols("other/EF/other.sym", "", 10) == []


def test_purge_forgets_what_was_awaited_before_the_cut(crash_index: CrashIndex):
    path = "game/CD/game.sym"
    crash_index.insert_many([entry(1, processing="pending"), entry(2, processing="pending")])
    crash_index.processed([Processed(entry(1).report_key, "processed", missing_symbols=(path,), at=1_000),
                           Processed(entry(2).report_key, "processed", missing_symbols=(path,), at=3_000)])
    crash_index.purge(2_000)
    assert crash_index.awaiting_symbols(path, "", 10) == [entry(2).report_key]
