"""Minidump processing for `blackbox bench`: the processor (crashes.processing: read the dump,
walk it, store the walk, update the index) on each profile, against the stack walker alone on the
same dumps in the same run, without symbols and with the program's symbol file held. The dumps
are the real ones of tests/fixtures/minidumps (a small Rust program; a game's walk reads more
modules and larger symbol files, so these are a floor on the cost, not a forecast)."""

from __future__ import annotations

import itertools
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from adapters.factory import build, migrate
from adapters.settings import Settings
from adapters.stackwalk import Stackwalker
from benchmarks.isolation import isolated
from crashes.model import ReportDocument, attachment_key
from crashes.processing import Processor, walk_request
from lambdas.functions import BATCH_RECORDS
from loadgen.stats import percentile
from pipeline.topics import MINIDUMPS
from ports import IndexEntry, LogRecord
from ports.minidumps import Walked, WalkFailed

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "minidumps"
DUMPS = ("level-magic", "level-version", "patch")
# a poller's batch of walk requests, as serve's and AWS's hand them over
BATCH = BATCH_RECORDS["minidump-processor"]
SKU = "bench-walks:linux"


@dataclass(frozen=True)
class Walks:
    """One way of walking `count` dumps: how long it took, and each walk's own time in ms."""

    count: int
    seconds: float
    walks_ms: tuple[float, ...]

    def row(self, name: str) -> str:
        s = self.walks_ms
        return (f"| {name} | {self.count / self.seconds:,.0f} | {self.seconds * 1000 / self.count:.1f} | "
                f"{percentile(s, 50):.1f} | {percentile(s, 95):.1f} |")


class _Timed:
    """The walker, each walk timed."""

    def __init__(self, walker: Stackwalker) -> None:
        self.walker = walker
        self.samples: list[float] = []

    def walk(self, minidump: bytes, symbols: Path) -> Walked | WalkFailed:
        started = time.perf_counter()
        try:
            return self.walker.walk(minidump, symbols)
        finally:
            self.samples.append((time.perf_counter() - started) * 1000)


def _walker_alone(walker: Stackwalker, dumps: Sequence[bytes], symbols: Path) -> Walks:
    timed = _Timed(walker)
    started = time.perf_counter()
    for dump in dumps:
        walked = timed.walk(dump, symbols)
        assert isinstance(walked, Walked), walked
    return Walks(len(dumps), time.perf_counter() - started, tuple(timed.samples))


def _body(key: str) -> bytes:
    return ReportDocument(eventId=key, reportKey=key, receivedAt=1, payload={"sku": SKU}).model_dump_json().encode()


def _processor(settings: Settings, walker: Stackwalker, count: int, with_symbols: bool) -> Walks:
    """`count` reports' walk requests in poller batches."""
    a = build(settings)
    try:
        dumps = [(FIXTURES / f"{name}.dmp").read_bytes() for name in DUMPS]
        keys = [f"{n:032x}" for n in range(count)]
        for start in range(0, count, BATCH):
            part = keys[start:start + BATCH]
            # each report's body too: its sku says how its walk is grouped
            a.documents.upsert_many({k: v for key, dump in zip(part, itertools.cycle(dumps), strict=False)
                                     for k, v in ((attachment_key(key, "crash.dmp"), dump), (key, _body(key)))}, 3600)
            a.index.insert_many([IndexEntry(report_key=key, event_id=key, sku=SKU, received_at=1,
                                            size_bytes=1, attachments=("crash.dmp",), processing="pending")
                                 for key in part])
        if with_symbols:
            [sym] = FIXTURES.glob("*/*/*.sym")
            a.symbols.put(str(sym.relative_to(FIXTURES)), sym.read_bytes(), 1)
        timed = _Timed(walker)
        processor = Processor(documents=a.documents, index=a.index, symbols=a.symbols, walker=timed, log=a.log,
                              issues=a.issues, ttl_seconds=3600)
        batches = [[LogRecord(MINIDUMPS, 0, n, r.value, r.key, r.headers, 0)
                    for n, r in enumerate(walk_request(key, "crash.dmp") for key in keys[start:start + BATCH])]
                   for start in range(0, count, BATCH)]
        started = time.perf_counter()
        for batch in batches:
            results = processor.process(batch)
            assert len(results) == len(batch) and all(r.state == "processed" for r in results)
        return Walks(count, time.perf_counter() - started, tuple(timed.samples))
    finally:
        a.close()


def run(count: int, progress: Callable[[str], None]) -> list[str]:
    walker = Stackwalker.installed()
    dumps = [(FIXTURES / f"{name}.dmp").read_bytes() for name in itertools.islice(itertools.cycle(DUMPS), count)]
    rows = []
    with tempfile.TemporaryDirectory() as empty:
        for with_symbols, symbols in ((False, Path(empty)), (True, FIXTURES)):
            held = "with symbols" if with_symbols else "without symbols"
            progress(f"minidumps: the walker alone, {held}")
            rows.append(_walker_alone(walker, dumps, symbols).row(f"walker alone, {held}"))
            for profile in ("embedded", "services"):
                progress(f"minidumps: the processor on {profile}, {held}")
                with isolated(profile) as settings:
                    migrate(settings)
                    walks = _processor(settings, walker, count, with_symbols)
                rows.append(walks.row(f"processor on {profile}, {held}"))
    return [
        "## Minidump processing",
        "",
        f"{count} walks of the three real minidumps of `tests/fixtures/minidumps` (23 to 28 KB each, "
        "a Rust program and libc), round robin. *Walker alone*: `blackbox-stackwalk` (rust-minidump) run on "
        "each dump, as the processor runs it, one process a walk. *Processor*: walk requests in batches of "
        f"{BATCH}, as a poller hands them over: each dump read from the document store, walked, its walk "
        "stored and its index row updated. *ms per dump*: all of it, the time over the count; *walk p50, p95*: "
        "the walks alone. *With symbols*: the program's "
        "`.sym` (246 KB) is held; libc has none either way.",
        "",
        "| walks | dumps/s | ms per dump | walk p50 ms | walk p95 ms |",
        "|---|---:|---:|---:|---:|",
        *rows,
        "",
    ]
