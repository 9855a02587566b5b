"""crashes.processing on the embedded adapters with the real stack walker and real minidumps
(tests/fixtures/minidumps): requests walked once in effect, however often they come; a symbol
file's arrival asks for every report that awaited it, a page at a time; a bad request is set aside
alone; a store away from this machine (S3) is asked for what the first walk lacked."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.factory import Adapters
from adapters.stackwalk import Stackwalker, WalkerBroken
from adapters.symbols.s3 import S3SymbolStore
from crashes import processing
from crashes.grouping import regroup_request
from crashes.model import attachment_key
from crashes.processing import (
    WALK_TRIES,
    Processor,
    WalkRequest,
    minidump_of,
    module_symbols,
    processed_key,
    read_processed,
    symbols_arrived,
    walk_request,
)
from crashes.signature import frames_signature
from pipeline.topics import DEADLETTER, MINIDUMPS
from ports import IndexEntry, LogRecord, OutgoingRecord, ReportFilter
from ports.issues import Change
from ports.minidumps import MAX_FRAMES, Frame, Module, StackWalker, Walked, WalkFailed, WalkLate
from tests.conftest import s3_bucket

FIXTURES = Path(__file__).parents[1] / "fixtures" / "minidumps"
[SYMBOL_FILE] = FIXTURES.glob("*/*/*.sym")
SYMBOL_PATH = str(SYMBOL_FILE.relative_to(FIXTURES))
SKU = "emberfall:linux"
# the minidump format's
MODULE_LIST_STREAM, MODULE_BYTES = 4, 108


@pytest.fixture(scope="module")
def walker() -> Stackwalker:
    return Stackwalker.installed()


def processor(adapters: Adapters, walker: StackWalker, **ports: Any) -> Processor:
    return Processor(**{"documents": adapters.documents, "index": adapters.index, "symbols": adapters.symbols,
                        "walker": walker, "log": adapters.log, "issues": adapters.issues, "ttl_seconds": 3600,
                        **ports})


def stored(adapters: Adapters, key: str, dump: bytes) -> None:
    """A report's minidump, as the crash consumer stores it; not its body: the walk's sku is the
    index row's."""
    adapters.documents.upsert_many({attachment_key(key, "crash.dmp"): dump}, 3600)


def indexed(adapters: Adapters, n: int, dump: str = "level-magic", sku: str = SKU) -> str:
    """A report with this minidump, as the crash consumer leaves it; its key."""
    key = f"{n:032x}"
    stored(adapters, key, (FIXTURES / f"{dump}.dmp").read_bytes())
    adapters.index.insert_many([IndexEntry(report_key=key, event_id=f"e{n}", sku=sku, received_at=n, size_bytes=1,
                                           attachments=("crash.dmp",), processing="pending")])
    return key


def records(values: list[OutgoingRecord]) -> list[LogRecord]:
    return [LogRecord(MINIDUMPS, 0, offset, r.value, r.key, r.headers, 0) for offset, r in enumerate(values)]


def entries(adapters: Adapters, sku: str = SKU) -> dict[str, IndexEntry]:
    return {r.entry.report_key: r.entry for r in adapters.index.find(ReportFilter(sku=sku, limit=1000))}


def walked_frames(adapters: Adapters, key: str) -> list[str]:
    """The frames of a report's walk that its signature is made of, as named there."""
    document = read_processed(adapters.documents.get_many([processed_key(key)])[processed_key(key)])
    return [f["function"] or f"{f['module']}@{f['moduleOffset']}" for f in document["frames"] if f["trust"] != "scan"]


def published(adapters: Adapters, group: str, topic: str = MINIDUMPS) -> list[LogRecord]:
    consumer = adapters.log.consumer(group, topic)
    found = consumer.poll(10_000, 1 << 30, 0.1)
    consumer.commit(found)
    consumer.close()
    return found


def test_the_first_minidump_is_the_one_walked():
    assert minidump_of({"log.txt": b"MDMP? no", "a.dmp": b"MDMP\x93\xa7", "b.dmp": b"MDMP"}) == "a.dmp"
    assert minidump_of({"big-endian.dmp": b"PMDM\x00\x00\xa7\x93"}) == "big-endian.dmp"
    assert minidump_of({"shot.png": b"\x89PNG"}) is None


def test_a_request_that_comes_again_walks_to_the_same_state(adapters: Adapters, walker: Stackwalker):
    key = indexed(adapters, 1)
    batch = records([walk_request(key, "crash.dmp")] * 2)
    process = processor(adapters, walker)
    first = process.process(batch)
    walked_once = entries(adapters)[key], read_processed(adapters.documents.get_many([processed_key(key)])
                                                          [processed_key(key)])
    again = process.process(batch)
    walked_twice = entries(adapters)[key], read_processed(adapters.documents.get_many([processed_key(key)])
                                                           [processed_key(key)])
    assert [r.state for r in first] == [r.state for r in again] == ["processed"]
    assert walked_once[0] == walked_twice[0]
    assert {**walked_once[1], "processedAt": 0} == {**walked_twice[1], "processedAt": 0}
    assert walked_once[0].processing == "processed" and SYMBOL_PATH in walked_once[1]["missingSymbols"]
    assert str(walked_once[1]["processedAt"]).endswith("Z")


# found from outside: answered in epoch ms, where every other time is RFC 3339
def test_a_walks_time_is_rfc_3339_also_of_one_stored_in_epoch_ms():
    earlier = {"state": "failed", "reason": "truncated", "attachment": "crash.dmp", "processedAt": 1795926634368,
               "crashReason": None, "crashAddress": None, "stackTrace": None, "signature": None, "frames": [],
               "modules": [], "missingSymbols": []}
    assert read_processed(json.dumps(earlier).encode())["processedAt"] == "2026-11-29T04:30:34.368Z"


# found from outside: a group made by walks had no issue (GET, a state, a merge: 404), also once a
# reprocessing or a symbol file moved reports to it; and a report of a minidump alone, which gets its
# group from its walk, never raised new-group nor regressed one
def test_a_walk_moves_the_group_of_a_report_that_had_none(adapters: Adapters, walker: Stackwalker):
    keys = [indexed(adapters, n) for n in (5, 3)]
    process = processor(adapters, walker)
    process.process(records([walk_request(key, "crash.dmp") for key in keys]))
    [signature] = {entries(adapters)[key].signature for key in keys}
    assert signature is not None
    issue = adapters.issues.issue(SKU, signature)
    assert issue is not None and (issue.state, issue.first_seen) == ("unresolved", 3)

    def raised() -> list[str]:
        return [r.alert.kind for r in adapters.issues.alert_history(SKU, 0, 1 << 62, None, 10)]

    assert raised() == ["new-group"]
    # walked again (a symbol file, a reprocessing): moved nowhere, nothing raised again
    process.process(records([walk_request(key) for key in keys] * 2))
    assert raised() == ["new-group"]
    adapters.issues.change(SKU, signature, Change("resolved", 10, "test"))
    later = indexed(adapters, 20)
    process.process(records([walk_request(later, "crash.dmp")]))
    assert adapters.issues.issue(SKU, signature).state == "regressed"  # type: ignore[union-attr]
    assert raised() == ["regressed", "new-group"]


def test_a_walk_gives_the_group_of_a_report_that_had_one_an_issue_and_raises_nothing(adapters: Adapters,
                                                                                     walker: Stackwalker):
    key = f"{7:032x}"
    stored(adapters, key, (FIXTURES / "level-magic.dmp").read_bytes())
    adapters.index.insert_many([IndexEntry(report_key=key, event_id="e7", sku=SKU, received_at=7, size_bytes=1,
                                           attachments=("crash.dmp",), signature="client", processing="pending")])
    processor(adapters, walker).process(records([walk_request(key, "crash.dmp")]))
    signature = entries(adapters)[key].signature
    assert signature not in (None, "client") and adapters.issues.issue(SKU, signature) is not None
    assert adapters.issues.alert_history(SKU, 0, 1 << 62, None, 10) == []  # its client's group raised what it did


def test_a_symbol_files_arrival_asks_for_every_report_that_awaited_it_a_page_at_a_time(
        adapters: Adapters, walker: Stackwalker, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(processing, "AWAITING_PAGE", 2)
    keys = [indexed(adapters, n) for n in range(1, 6)]
    process = processor(adapters, walker)
    process.process(records([walk_request(key, "crash.dmp") for key in keys]))
    adapters.symbols.put(SYMBOL_PATH, SYMBOL_FILE.read_bytes(), 1)
    asked: list[str] = []
    pending = [symbols_arrived(SYMBOL_PATH)]
    published(adapters, "pages")  # what came before
    while pending:
        assert process.process(records(pending)) == []  # a page of requests, and perhaps the next page's
        out = published(adapters, "pages")
        asked += [r.key.decode() for r in out if b'"reportKey"' in r.value]
        pending = [OutgoingRecord(r.value, r.key) for r in out if b'"symbols"' in r.value]
    assert sorted(asked) == keys  # each once (keyed by report: partitions interleave them)
    # walked again, each awaits the file no more, and names the program's functions
    process.process(records([walk_request(key) for key in asked]))
    assert adapters.index.awaiting_symbols(SYMBOL_PATH, "", 10) == []
    assert len({entry.signature for entry in entries(adapters).values()}) == 1


def test_a_bad_request_is_set_aside_alone(adapters: Adapters, walker: Stackwalker):
    key = indexed(adapters, 1)
    bad = [OutgoingRecord(b'{"reportKey": "../x"}'), OutgoingRecord(b"not json"),
           OutgoingRecord(b'{"reportKey": "%s", "symbols": "a/b/c.sym"}' % key.encode())]
    results = processor(adapters, walker).process(records([*bad[:2], walk_request(key, "crash.dmp"), bad[2]]))
    assert [r.report_key for r in results] == [key]
    dead = published(adapters, "dead", DEADLETTER)
    assert len(dead) == 3 and all(dict(r.headers)["reason"].startswith(b"malformed minidump request") for r in dead)


def test_an_unreadable_dump_is_failed_with_its_reason_and_keeps_the_clients_crash(adapters: Adapters,
                                                                                   walker: Stackwalker):
    key = f"{9:032x}"
    stored(adapters, key, b"MDMP\x93\xa7" + b"\xff" * 64)
    adapters.index.insert_many([IndexEntry(report_key=key, event_id="e9", sku=SKU, received_at=9, size_bytes=1,
                                           crash_type="minidump", signature="client", processing="pending")])
    [result] = processor(adapters, walker).process(records([walk_request(key, "crash.dmp")]))
    entry = entries(adapters)[key]
    assert (result.state, entry.processing, entry.crash_type, entry.signature) == (
        "failed", "failed", "minidump", "client")
    assert read_processed(adapters.documents.get_many([processed_key(key)])[processed_key(key)])["reason"]


@pytest.fixture
def s3_symbols(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3SymbolStore]:
    with s3_bucket(monkeypatch, "symbols") as client:
        yield S3SymbolStore(client, "symbols", tmp_path / "cache")


def test_a_store_away_from_this_machine_is_asked_for_what_the_first_walk_lacked(
        adapters: Adapters, walker: Stackwalker, s3_symbols: S3SymbolStore):
    key = indexed(adapters, 1)
    process = processor(adapters, walker, symbols=s3_symbols)
    [bare] = process.process(records([walk_request(key, "crash.dmp")]))
    s3_symbols.put(SYMBOL_PATH, SYMBOL_FILE.read_bytes(), 1)
    [named] = process.process(records([walk_request(key)]))
    walked = read_processed(adapters.documents.get_many([processed_key(key)])[processed_key(key)])
    assert walked["frames"][0]["function"] == "blackbox_crasher::parse_level_header"
    assert bare.signature != named.signature
    # deleted from the store, the next walk has it no more, whatever the cache held
    s3_symbols.delete(SYMBOL_PATH)
    [bare_again] = process.process(records([walk_request(key)]))
    assert bare_again.signature == bare.signature



class Unwinding:
    """A walker that reaches a module further for each module whose symbols it holds, as call frame
    information unwinds past what a scan of the stack could not; its walks, counted."""

    def __init__(self, modules: int) -> None:
        self.modules = tuple(Module(filename=f"m{n}.so", base_addr=hex(0x10000 * (n + 1)), debug_file=f"m{n}.so",
                                    debug_id=f"{n:033X}") for n in range(modules))
        self.walks = 0

    def walk(self, minidump: bytes, symbols: Path) -> Walked:
        self.walks += 1
        frames: list[Frame] = []
        for module in self.modules:
            path = module_symbols(module)
            held = path is not None and (symbols / path).is_file()
            frames.append(Frame(offset=hex(module.base_address + 0x10), module=module.name, module_offset="0x10",
                                function=f"{module.name}::f" if held else None, trust="cfi", missing_symbols=not held))
            if not held:
                break
        return Walked(crash_reason="SIGSEGV", crash_address=0, frames=tuple(frames), modules=self.modules)


def test_a_store_away_is_asked_again_for_what_a_walk_with_its_first_files_reached(s3_symbols: S3SymbolStore):
    """Found from outside: only the first walk's modules were fetched, so the frames a second walk
    reached with their symbols stayed unnamed though the store held theirs (the directory store
    walks with every file at once), and the report, grouped apart, awaited a file already there."""
    unwinding = Unwinding(modules=3)
    for module in unwinding.modules[:2]:
        s3_symbols.put(str(module_symbols(module)), b"MODULE", 1)
    walked = processing.walk(unwinding, s3_symbols, b"MDMP")
    assert isinstance(walked, Walked)
    assert [frame.function for frame in walked.frames] == ["m0.so::f", "m1.so::f", None]
    assert [module.name for module in walked.modules_missing_symbols] == ["m2.so"]
    assert unwinding.walks == 3


def test_a_walk_is_walked_again_a_bounded_number_of_times(s3_symbols: S3SymbolStore):
    unwinding = Unwinding(modules=10)
    for module in unwinding.modules:
        s3_symbols.put(str(module_symbols(module)), b"MODULE", 1)
    walked = processing.walk(unwinding, s3_symbols, b"MDMP")
    assert isinstance(walked, Walked) and unwinding.walks == processing.WALKS


def test_a_symbol_file_stored_during_a_walk_has_the_report_walked_once_more(adapters: Adapters, walker: Stackwalker):
    """The file's arrival asked for the reports awaiting it before this walk said it awaits it."""
    key = indexed(adapters, 1)

    class Uploading:
        def walk(self, minidump: bytes, symbols: Path) -> Walked | WalkFailed:  # the file comes after the read
            walked = walker.walk(minidump, symbols)
            adapters.symbols.put(SYMBOL_PATH, SYMBOL_FILE.read_bytes(), 1)
            return walked

    published(adapters, "race")
    processor(adapters, Uploading()).process(records([walk_request(key, "crash.dmp")]))
    [again] = published(adapters, "race")
    assert again.key == key.encode() and b'"last":true' in again.value
    [named] = processor(adapters, walker).process(records([OutgoingRecord(again.value, again.key)]))
    assert named.missing_symbols and SYMBOL_PATH not in named.missing_symbols
    assert published(adapters, "race") == []  # libc's are still missing, and not held: no more


@pytest.mark.parametrize("debug_file", [
    "..", "C:\\build\\..", "nul\0.pdb", ".", "/", ".pdb",
    # found from outside: a name over a file name's 255 bytes made the check for a symbol file that
    # arrived meanwhile raise ENAMETOOLONG, and the processor retried its batch for good; one whose
    # symbol path outgrew awaiting_symbols (512 characters) sent the walk to the dead letters
    "/x/" + "\U00020000" * 200, "/x/" + "n" * 300, "/x/" + "n" * 240,
    # and names no symbol file may have: an upload refuses them
    "game?.so", "tab\t.so",
])
def test_a_module_naming_no_file_a_store_could_hold_awaits_none(debug_file: str):
    """Found in review: a crafted dump's module named `..` made a path the stores refuse, so the
    report's walk went to the dead letters and the report stayed pending."""
    module = Module(filename="m", base_addr="0x1000", debug_file=debug_file, debug_id="A" * 33)
    assert module_symbols(module) is None
    assert module_symbols(module.model_copy(update={"debug_file": "game.so", "debug_id": "not hex"})) is None
    assert module_symbols(Module(filename="m", base_addr="0x1000", debug_file="C:\\build\\game.pdb",
                                 debug_id="a" * 33)) == f"game.pdb/{'A' * 33}/game.sym"


def test_a_report_purged_since_it_was_asked_for_is_not_walked(adapters: Adapters, walker: Stackwalker):
    """Found in review: a symbol file's arrival walked a purged report again and wrote its walk."""
    key = f"{7:032x}"
    stored(adapters, key, (FIXTURES / "patch.dmp").read_bytes())
    assert processor(adapters, walker).process(records([walk_request(key, "crash.dmp")])) == []
    assert adapters.documents.get_many([processed_key(key)]) == {}


def test_a_walk_is_grouped_by_its_skus_rules_and_a_reprocessing_walks_it_again(adapters: Adapters,
                                                                               walker: Stackwalker):
    key = indexed(adapters, 11)
    process = processor(adapters, walker)
    process.process(records([walk_request(key, "crash.dmp")]))
    before = entries(adapters)[key].signature
    named = walked_frames(adapters, key)
    assert before == frames_signature(named) and len(named) > 1
    adapters.issues.set_rules(SKU, [named[0]], [], 1, "test")
    # a reprocessing's page asks for the walked report's walk again, which the rules now group
    process.process(records([regroup_request(SKU)]))
    [again] = published(adapters, "regroup")
    assert WalkRequest.model_validate_json(again.value).reportKey == key
    assert entries(adapters)[key].signature == before
    process.process([again])
    assert entries(adapters)[key].signature == frames_signature(named[1:]) != before


# found from outside: each retry of such a batch asked again for what its reprocessing page and its
# symbol file's arrival had asked for: the topic grew by 180 records a second while the walker was away
def test_a_batch_the_walker_cannot_run_asks_for_nothing_until_it_lands(adapters: Adapters, walker: Stackwalker,
                                                                       tmp_path: Path):
    key = indexed(adapters, 31)
    process = processor(adapters, walker)
    process.process(records([walk_request(key, "crash.dmp")]))  # walked, and awaits the program's symbols
    published(adapters, "held")  # what came before
    broken = tmp_path / "walker"
    broken.write_text("#!/bin/sh\nexit 127\n")
    broken.chmod(0o755)
    batch = records([regroup_request(SKU), symbols_arrived(SYMBOL_PATH), walk_request(indexed(adapters, 32),
                                                                                      "crash.dmp")])
    for _ in range(3):
        with pytest.raises(WalkerBroken):
            processor(adapters, Stackwalker(broken)).process(batch)
    assert published(adapters, "held") == []
    process.process(batch)
    asked = [WalkRequest.model_validate_json(r.value).reportKey for r in published(adapters, "held")]
    assert sorted(asked) == sorted([key, key, f"{32:032x}", f"{32:032x}"])  # by the page, and by the arrival


def test_a_late_walk_is_asked_for_again_and_holds_back_none_of_its_batch(adapters: Adapters, walker: Stackwalker):
    """Found in review: a walk past its deadline of wall time (a busy machine's doing) failed its
    whole batch, whose walks were done again at each retry, for as long as the machine stayed busy."""
    late, walked = indexed(adapters, 41), indexed(adapters, 42, dump="patch")
    late_dump = (FIXTURES / "level-magic.dmp").read_bytes()

    class Busy:
        def walk(self, minidump: bytes, symbols: Path) -> Walked | WalkFailed:
            if minidump == late_dump:
                raise WalkLate("blackbox-stackwalk took longer than 60 s within its 20 s of CPU")
            return walker.walk(minidump, symbols)

    published(adapters, "late")
    [result] = processor(adapters, Busy()).process(records([walk_request(late, "crash.dmp", last=True),
                                                              walk_request(walked, "crash.dmp")]))
    assert result.report_key == walked and result.state == "processed"
    assert entries(adapters)[late].processing == "pending"
    [again] = published(adapters, "late")
    assert WalkRequest.model_validate_json(again.value) == WalkRequest(reportKey=late, attachment="crash.dmp",
                                                                       last=True, late=1)
    [named] = processor(adapters, walker).process(records([OutgoingRecord(again.value, again.key)]))
    assert named.report_key == late and named.state == "processed"


def test_a_walk_late_at_every_try_is_failed_after_its_last(adapters: Adapters):
    """Left alone in a note, then mended: a report whose walks stayed late was asked for again
    without end, for as long as the machine left it too little of the cores."""
    key = indexed(adapters, 43)

    class Busy:
        def walk(self, minidump: bytes, symbols: Path) -> Walked | WalkFailed:
            raise WalkLate("blackbox-stackwalk took longer than 60 s within its 20 s of CPU")

    published(adapters, "late")
    request = walk_request(key, "crash.dmp")
    for tried in range(1, WALK_TRIES):
        assert processor(adapters, Busy()).process(records([request])) == []
        [request] = published(adapters, "late")
        assert WalkRequest.model_validate_json(request.value).late == tried
        assert entries(adapters)[key].processing == "pending"
    [failed] = processor(adapters, Busy()).process(records([request]))
    assert (failed.report_key, failed.state) == (key, "failed") and published(adapters, "late") == []
    reason = read_processed(adapters.documents.get_many([processed_key(key)])[processed_key(key)])["reason"]
    assert reason == f"the walk outlasted its deadline {WALK_TRIES} times (the machine was busy)"


def test_a_report_the_invocation_has_no_time_left_for_is_asked_for_again_not_begun(adapters: Adapters,
                                                                                   walker: Stackwalker):
    """Found from outside: a batch of 5 reports, each walked up to 3 times within the walker's
    deadlines, could outlast the function's timeout of 420 s; the timeout kills the walk with the
    batch unkept, and its retry does it all again, holding back its partition for as long as the
    topic keeps it. A report begun only with the time its walks and the batch's writes may take
    (BEGIN_WITH_S) left; the others are asked for again, as a late walk is, and the first is always
    begun."""
    first, second, third = indexed(adapters, 51), indexed(adapters, 52, dump="patch"), indexed(adapters, 53)
    walks: list[bytes] = []

    class Counted:
        def walk(self, minidump: bytes, symbols: Path) -> Walked | WalkFailed:
            walks.append(minidump)
            return walker.walk(minidump, symbols)

    def time_left_s() -> float:  # enough for the second report, not for the third
        return processing.BEGIN_WITH_S if len(walks) < 2 else processing.BEGIN_WITH_S - 1

    published(adapters, "timed")
    asked = [walk_request(first, "crash.dmp"), walk_request(second, "crash.dmp"),
             walk_request(third, "crash.dmp", late=2)]
    results = processor(adapters, Counted(), time_left_s=time_left_s).process(records(asked))
    assert [(r.report_key, r.state) for r in results] == [(first, "processed"), (second, "processed")]
    assert len(walks) == 2
    [again] = [WalkRequest.model_validate_json(r.value) for r in published(adapters, "timed")]
    assert again == WalkRequest(reportKey=third, attachment="crash.dmp", late=2)  # not late: no try counted
    assert entries(adapters)[third].processing == "pending"
    # an invocation with less than that left still begins its first
    [done] = processor(adapters, walker, time_left_s=lambda: 0.0).process(records([walk_request(third, "crash.dmp")]))
    assert (done.report_key, done.state) == (third, "processed")


def test_the_halves_of_a_batch_that_failed_begin_no_report_without_the_time_for_it(adapters: Adapters,
                                                                                   walker: Stackwalker):
    """Found in review: a batch a value failed is tried again in halves, and each half began its first
    report whatever the invocation had left, so a poison walk after a long one led to the timeout
    the time budget is there to avoid. And from the next review: halves that began none asked for
    every report again, the poison among them, which no retry then set aside. A half takes the
    walks the invocation made (or the error one raised) as they were."""
    first, second = indexed(adapters, 61), indexed(adapters, 62, dump="patch")
    patch = (FIXTURES / "patch.dmp").read_bytes()
    walks: list[bytes] = []

    class Poisoned:
        def walk(self, minidump: bytes, symbols: Path) -> Walked | WalkFailed:
            walks.append(minidump)
            if minidump == patch:
                raise ValueError("a value no store takes")
            return walker.walk(minidump, symbols)

    def time_left_s() -> float:  # enough for the batch's two reports, then for no other
        return processing.BEGIN_WITH_S if len(walks) < 2 else processing.BEGIN_WITH_S - 1

    published(adapters, "halves")
    published(adapters, "halves-dead", DEADLETTER)
    asked = [walk_request(first, "crash.dmp"), walk_request(second, "crash.dmp")]
    results = processor(adapters, Poisoned(), time_left_s=time_left_s).process(records(asked))
    assert [(r.report_key, r.state) for r in results] == [(first, "processed")]
    assert len(walks) == 2  # neither half walked its report again
    assert published(adapters, "halves") == []  # nothing asked for again
    [dead] = published(adapters, "halves-dead", DEADLETTER)
    assert WalkRequest.model_validate_json(dead.value).reportKey == second


def test_each_walk_of_a_batch_is_grouped_by_its_own_reports_sku(adapters: Adapters, walker: Stackwalker):
    """Found in review: the walk's sku comes from each report's index row, and every test had one sku,
    so a batch handing one report another's sku would have passed."""
    process = processor(adapters, walker)
    probe = indexed(adapters, 21)
    process.process(records([walk_request(probe, "crash.dmp")]))
    named = walked_frames(adapters, probe)
    other = "emberfall:ps5"
    adapters.issues.set_rules(other, [named[0]], [], 1, "test")
    mine, theirs, mine_again = indexed(adapters, 22), indexed(adapters, 23, sku=other), indexed(adapters, 24)
    process.process(records([walk_request(key, "crash.dmp") for key in (mine, theirs, mine_again)]))
    assert entries(adapters)[mine].signature == entries(adapters)[mine_again].signature == frames_signature(named)
    assert entries(adapters, other)[theirs].signature == frames_signature(named[1:])


def with_modules(dump: bytes, count: int, name: str) -> bytes:
    """The dump with `count` more modules in its module list (MINIDUMP_MODULE, 108 bytes each), copies
    of its first at addresses of their own, each named `name`: what a client can send."""
    _, _, streams, directory = struct.unpack_from("<4sIII", dump, 0)
    [(index, rva)] = [(i, struct.unpack_from("<III", dump, directory + 12 * i)[2]) for i in range(streams)
                      if struct.unpack_from("<I", dump, directory + 12 * i)[0] == MODULE_LIST_STREAM]
    listed = struct.unpack_from("<I", dump, rva)[0]
    out = bytearray(dump)
    encoded = name.encode("utf-16-le")
    name_rva = len(out)
    out += struct.pack("<I", len(encoded)) + encoded + b"\0\0\0\0"
    first = dump[rva + 4: rva + 4 + MODULE_BYTES]
    added = bytearray()
    for k in range(count):
        module = bytearray(first)
        struct.pack_into("<QI", module, 0, 0x7F0000000000 + k * 0x100000, 0x1000)
        struct.pack_into("<I", module, 20, name_rva)
        added += module
    list_rva = len(out)
    out += struct.pack("<I", listed + count) + dump[rva + 4: rva + 4 + MODULE_BYTES * listed] + added
    struct.pack_into("<III", out, directory + 12 * index, MODULE_LIST_STREAM, 4 + MODULE_BYTES * (listed + count),
                     list_rva)
    return bytes(out)


def test_a_walk_answers_within_its_bound_whatever_the_dump_lists(adapters: Adapters, walker: Stackwalker):
    """Found from outside: a dump of 760 KB listing 6,800 modules of a long non-ASCII name made a walk
    of 28 MB, and its report an answer of 84 MB (API Gateway and Lambda answer 6 MB at most)."""
    plain, crafted = indexed(adapters, 1), f"{2:032x}"
    dump = with_modules((FIXTURES / "level-magic.dmp").read_bytes(), 1500, "é" * 300)
    stored(adapters, crafted, dump)
    adapters.index.insert_many([IndexEntry(report_key=crafted, event_id="e2", sku=SKU, received_at=2, size_bytes=1,
                                           attachments=("crash.dmp",), processing="pending")])
    processor(adapters, walker).process(records([walk_request(plain, "crash.dmp"), walk_request(crafted, "crash.dmp")]))
    walks = {key: read_processed(adapters.documents.get_many([processed_key(key)])[processed_key(key)])
             for key in (plain, crafted)}
    assert len(json.dumps(walks[crafted])) <= processing.MAX_PROCESSED_BYTES
    # the crashing thread's frames and their modules stay; the modules listed besides go, counted
    assert walks[crafted]["frames"] == walks[plain]["frames"]
    assert walks[crafted]["stackTrace"] == walks[plain]["stackTrace"]
    kept = {m["name"] for m in walks[crafted]["modules"]}
    assert {f["module"] for f in walks[crafted]["frames"] if f["module"]} <= kept
    left_out = 1500 + len(walks[plain]["modules"]) - len(walks[crafted]["modules"])
    assert walks[crafted]["omitted"] == {"modules": left_out, "frames": 0, "missingSymbols": 0} and left_out > 0
    assert walks[plain]["omitted"] == {"modules": 0, "frames": 0, "missingSymbols": 0}


def test_a_walk_leaves_out_other_modules_then_outer_frames_then_the_rest_and_cuts_long_names(adapters: Adapters):
    wide = "\U0001d400" * 2000  # 12 bytes each as answered
    frames = tuple(Frame(offset=hex(0x1000 + n), module=f"m{n % 3}", module_offset="0x10", function=wide,
                         file=wide, line=n, trust="cfi") for n in range(MAX_FRAMES))
    modules = tuple(Module(filename=f"m{n}" if n < 3 else wide, base_addr=hex(0x1000 + n - 0x10 if n < 3 else n),
                           debug_file=wide, debug_id="A" * 33) for n in range(300))
    walked = Walked(crash_reason="SIGSEGV", crash_address=1, frames=frames, modules=modules)
    document, _ = processing._processed("k" * 32, "crash.dmp", walked, 0, adapters.issues.grouping(SKU))
    assert len(json.dumps(document)) <= processing.MAX_PROCESSED_BYTES
    # every module of no frame went first, then frames from the outermost, each with its line
    assert document["omitted"]["modules"] == 297 and 0 < document["omitted"]["frames"] < MAX_FRAMES
    kept = MAX_FRAMES - document["omitted"]["frames"]
    assert [f["line"] for f in document["frames"]] == list(range(kept))
    assert document["stackTrace"] is not None and len(document["stackTrace"].split("\n")) == kept
    function = document["frames"][0]["function"]
    assert function is not None and len(function) == processing.MAX_SYMBOL_CHARS and function.endswith("…")
    assert [len(m["name"]) for m in document["modules"]] == [2, 2, 2]


def test_a_frame_left_out_takes_its_module_when_no_other_frame_is_in_it(adapters: Adapters):
    """Found in review: modules of frames went only after every frame: 256 frames, each in a module of
    long ids, kept no frame and 112 modules."""
    wide = "\U0001d400" * 256
    frames = tuple(Frame(offset=hex(0x10_0000 * n + 0x10), module=f"m{n}", module_offset="0x10", trust="cfi")
                   for n in range(MAX_FRAMES))
    modules = tuple(Module(filename=f"m{n}", base_addr=hex(0x10_0000 * n), debug_file=wide, debug_id=wide,
                           code_id=wide) for n in range(MAX_FRAMES))
    walked = Walked(crash_reason="SIGSEGV", crash_address=1, frames=frames, modules=modules)
    document, _ = processing._processed("k" * 32, "crash.dmp", walked, 0, adapters.issues.grouping(SKU))
    assert len(json.dumps(document)) <= processing.MAX_PROCESSED_BYTES
    kept = [f["module"] for f in document["frames"]]
    assert kept == [f"m{n}" for n in range(len(kept))] and len(kept) >= 64
    assert [m["name"] for m in document["modules"]] == kept  # each left with its frame, none before
    assert document["omitted"] == {"modules": MAX_FRAMES - len(kept), "frames": MAX_FRAMES - len(kept),
                                   "missingSymbols": 0}
