"""`blackbox bench`'s ranking section runs end to end on a tiny plan and reports every table.
Its figures are not asserted here (they are measurements, written to BENCHMARKS.md), only that
the run completes, the four rank methods agree, and no probe update went missing."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from adapters.factory import build, migrate
from api.requests import Posted
from benchmarks import crs, crs_tables, marked, minidumps, ranking, releases, report, soak
from benchmarks.isolation import isolated
from crashes.model import attachment_key
from crashes.persistence import persist_crashes
from lambdas import capture
from pipeline.topics import CRASHES
from ports import LogRecord


@pytest.mark.services
def test_ranking_section_runs_on_a_tiny_plan():
    plan = ranking.Plan(worker_updates=400, naive_updates=40, sizes=(300,), rank_queries=10, visible_rate=500,
                        visible_seconds=1.5)
    messages: list[str] = []
    lines = ranking.run(plan, messages.append)
    text = "\n".join(lines)
    assert "### Worker throughput" in text and "### Rank query latency" in text and "### Update-to-visible" in text
    assert any(line.startswith("| the same on boards that reset daily") for line in lines)
    # players, four rank methods, a friends list on each engine, a wipe; then a player's rank by tie mode
    [size_row, tie_row] = [line for line in lines if line.startswith("| 300 |")]
    assert len(size_row.split("|")) == 10 and len(tie_row.split("|")) == 5
    assert sum(line.startswith(("| earliest |", "| subscore |")) for line in lines) == 2
    # each tie mode's rate with the worker's own CPU an update, and the host's share said beside them
    modes = [row for row in lines if row.startswith(("| shared |", "| earliest |", "| subscore |"))]
    assert len(modes) == 3 and all(row.count(" µs)") == 3 for row in modes)
    assert re.search(r"the host took \d+% of this machine's CPU meanwhile", text)
    visible_row = next(line for line in lines if line.startswith("| 500/s"))
    assert visible_row.split("|")[4].strip() == "0"  # probes not seen
    assert any(m.startswith("rank: loading") for m in messages)


@pytest.mark.services
def test_release_health_section_runs_on_a_tiny_plan():
    lines = releases.run(releases.Plan(counted=2000, boards=((1, 1000), (3, 2000)), queries=3), lambda _: None)
    assert lines[0] == "## Release health"
    [counter] = [line for line in lines if line.startswith("| session counter |")]
    assert all(cell.strip() for cell in counter.split("|")[1:-1])
    assert [line.split("|")[1:3] for line in lines if line.startswith(("| 1 |", "| 3 |"))] == [
        [" 1 ", " 1,000 "], [" 3 ", " 2,000 "]]


@pytest.mark.services
def test_minidump_section_walks_every_dump_on_both_profiles_with_and_without_symbols():
    lines = minidumps.run(6, lambda _: None)
    rows = [line.split("|") for line in lines if line.startswith(("| walker", "| processor"))]
    assert [row[1].strip() for row in rows] == [
        f"{who}, {held}" for held in ("without symbols", "with symbols")
        for who in ("walker alone", "processor on embedded", "processor on services")]
    assert all(float(row[2].replace(",", "")) > 0 for row in rows)


@pytest.mark.services
def test_crash_reporting_section_runs_on_both_profiles_on_a_tiny_plan(tmp_path: Path):
    plan = crs.Plan(capture_seconds=0.5, concurrency=4, spike_rate=2, spike_seconds=4, query_sizes=(1, 200),
                    concurrent_sizes=(1,), query_repeats=1, consumer_records=20)
    results = [crs.run_profile(profile, plan, lambda _: None, tmp_path) for profile in ("embedded", "services")]
    text = "\n".join(crs_tables.section(results, plan, tmp_path / "plots"))
    for heading in ("### Capture throughput", "### Consumer persistence", "### Scale-out on `services`",
                    "### End to end", "### Query latency"):
        assert heading in text
    assert all(r.spike is not None and r.spike.verification.lost == 0
               for r in results)
    measured = {f"{name}@{workers}" for name in ("legacy", "bare", "floorSingle", "floorCrashes", "crashes",
                                                 "sessionsSingle", "sessionsBatched")
                for workers in crs.WORKER_COUNTS}
    alone = {f"{name}@{workers}:api" for name in ("crashes", "sessionsSingle", "sessionsBatched")
             for workers in crs.WORKER_COUNTS}
    assert measured <= set(results[0].capture) and not alone & set(results[0].capture)  # embedded: no --role api
    assert measured | alone <= set(results[1].capture)
    assert all(rate > 0 for r in results for rate in r.capture.values())
    assert "rawProducer" in results[1].capture and "rawProducer" not in results[0].capture
    projected = [line for line in text.splitlines() if line.startswith("| 32 |")]
    assert len(projected) == 1 and float(projected[0].split("|")[2].replace(",", "")) > 0
    assert (tmp_path / "plots" / "spike-throughput.png").stat().st_size > 1000


@pytest.mark.services
def test_the_crash_bench_deletes_the_documents_it_wrote():
    """CouchbaseMock keeps documents in its heap: a full run once left it out of memory."""
    with isolated("services") as settings:
        migrate(settings)
        a = build(settings)
        try:
            capture.crash(a.log, a.spill, Posted(crs.crash_bodies(1, "drop:pc", 2_000)[0]))
            records: list[LogRecord] = []
            consumer = a.log.consumer("drop-test", CRASHES)
            while not records:
                records = consumer.poll(10, 1 << 20, timeout_s=1.0)
            consumer.close()
            (entry,) = persist_crashes(records, a.documents, a.index, a.log, 3600)
            keys = [entry.report_key, *(attachment_key(entry.report_key, n) for n in entry.attachments)]
            assert len(a.documents.get_many(keys)) == 2
            crs.drop_documents(settings)
            assert a.documents.get_many(keys) == {}
        finally:
            a.close()


@pytest.mark.services
def test_the_soak_writes_its_block_figures_and_chart(tmp_path: Path):
    """A few seconds of it: the serve's memory is sampled, nothing is lost, and the block lands in
    BENCHMARKS.md between its markers, replacing the one there and keeping the rest."""
    output = tmp_path / "BENCHMARKS.md"
    output.write_text(f"# Benchmarks\n\nkept\n\n{soak.BEGIN}\nan older soak\n{soak.END}\n")
    soak.run(0.1, output, lambda _: None)
    text = output.read_text()
    assert text.startswith("# Benchmarks\n\nkept\n") and "an older soak" not in text
    assert text.count(soak.BEGIN) == 1 and text.rstrip().endswith(soak.END)
    results = json.loads((tmp_path / "benchmarks" / "soak.json").read_text())
    assert f"Run on {results['startedAt']}." in text  # replaced on its own, so it says when
    for run in ("soak", "overload"):
        assert results[run]["lost"] == 0 and results[run]["duplicated"] == 0
        samples = results[run]["serverMemory"]["samples"]
        assert len(samples) >= 5 and min(rss for _, rss in samples) > 20 << 20  # a serve and its workers
        # each process apart, by what it does: which one grew
        roles = results[run]["roles"]
        assert sorted(roles.values()) == ["API 0", "API 1", "consumers 0", "consumers 1", "supervisor"]
        assert set(roles) <= set(results[run]["serverMemory"]["byProcess"])
    assert "By process, level after the warm-up → peak: " in text and "supervisor " in text
    assert all(results[run]["clientLagMs"]["count"] == results[run]["requests"] + results[run]["shed"]["answers"]
               - results[run]["shed"]["gaveUp"] for run in ("soak", "overload"))  # a lag for each try
    assert "| the load generator's own lag (each try's latency above holds it), ms p50 / p95 / p99 | " in text
    assert (tmp_path / "benchmarks" / "plots" / "soak.png").stat().st_size > 1000


def test_a_marked_block_is_found_and_replaced_whole():
    begin, end = soak.BEGIN, soak.END
    block = f"{begin}\nthe soak\n{end}\n"
    assert marked.find(f"# Benchmarks\n\n{block}", begin, end) == block
    assert marked.put(f"# Benchmarks\n\n{block}", begin, end, "new\n") == f"# Benchmarks\n\n{begin}\nnew\n{end}\n"
    assert marked.put("# Benchmarks\n", begin, end, "new\n") == f"# Benchmarks\n\n{begin}\nnew\n{end}\n"
    assert marked.find("# Benchmarks\n", begin, end) == ""


def test_a_full_bench_keeps_what_was_measured_by_hand():
    """Measurements taken by hand (turns of two checkouts, a million reports) are not a bench's to
    redo: a rerun replaces its own tables and keeps them, where it had written over them."""
    soaked = f"{soak.BEGIN}\nthe soak\n{soak.END}\n"
    by_hand = f"{report.BY_HAND_BEGIN}\n## By hand\n\nturns of two checkouts\n{report.BY_HAND_END}\n"
    before = f"# Benchmarks\n\nold tables\n\n{soaked}\n{by_hand}"
    after = report.document("# Benchmarks\n\nnew tables\n", before)
    assert "old tables" not in after and "new tables" in after
    assert after.count(soaked) == 1 and after.count(by_hand) == 1
    assert report.document("# Benchmarks\n\nnew tables\n", None) == "# Benchmarks\n\nnew tables\n"


def test_the_overload_line_tells_unmeasured_from_missed():
    def overload(statuses: dict[str, int], throughput: float, overflow: int = 0, shed_p95: float | None = None
                 ) -> dict[str, Any]:
        shed = {"answers": 5, "latencyMs": {"p95": shed_p95}} if shed_p95 is not None else {"answers": 0}
        return {"baseRate": 2800.0, "throughput": throughput, "clientOverflow": overflow, "shed": shed,
                "statuses": {"sessions": statuses}}

    # serve took all that came: the client never took it past saturation
    assert "**not measured**" in soak._overload_line(overload({"202": 100}, 2790.0))
    assert "**not measured**" in soak._overload_line(overload({"202": 100}, 1500.0, overflow=900))
    # past saturation, answered late or not at all, and never shed
    assert "**missed**" in soak._overload_line(overload({"202": 90, "ServerTimeoutError": 10}, 1500.0))
    assert "**missed**" in soak._overload_line(overload({"202": 100, "503": 5}, 1500.0, shed_p95=900.0))
    assert "**met**" in soak._overload_line(overload({"202": 100, "503": 5}, 1500.0, shed_p95=40.0))
    # what of a miss is the load generator's own lag is said beside it, not taken off it
    behind = overload({"202": 100, "503": 5}, 1500.0, overflow=7, shed_p95=900.0) | {
        "clientLagMs": {"count": 105, "p50": 90.0, "p95": 400.0}}
    line = soak._overload_line(behind)
    assert "900 ms" in line and "**missed**" in line and "by 90 / 400 ms (p50 / p95)" in line and "send 7 " in line
    assert "not send" not in soak._overload_line(behind | {"clientOverflow": 0})


def test_the_overload_line_says_how_many_tries_waited_for_an_answer():
    """Little's law on the overload minute: 2,000 answers in 10 s, 1,500 accepted at a mean of 500 ms
    and 500 shed at 260: 200 answers a second and a mean of 440 ms, so 88 tries waiting at once."""
    run = {"baseRate": 2800.0, "throughput": 150.0, "clientOverflow": 0, "elapsedS": 10.0,
           "statuses": {"sessions": {"202": 1500, "503": 500}},
           "requestLatencyMs": {"all": {"count": 1500, "mean": 500.0}},
           "shed": {"answers": 500, "latencyMs": {"p95": 600.0, "mean": 260.0}}}
    line = soak._overload_line(run)
    assert "answered 200 tries a second" in line and "2,800 a second were due" in line
    assert "440 ms" in line and "88 tries waited" in line and "unread" not in line
    crowded = soak._overload_line(run | {"elapsedS": 0.1})  # 20,000 answers a second: 8,800 waiting
    assert "8,800 tries waited" in crowded and "hold 1,024 in their handlers at most" in crowded


def test_the_single_events_line_says_what_the_gateway_alone_leaves_the_handlers():
    """Serve's gateway with handlers that do nothing bounds what any handler behind it reaches:
    below the target, the miss is the gateway's; above it, the handlers'."""
    def rates(floor: float) -> dict[str, float]:
        return {f"{name}@{w}": rate for w in crs.WORKER_COUNTS
                for name, rate in (("floorSingle", floor), ("bare", 30_000.0))}

    top = crs.WORKER_COUNTS[-1]
    below = crs_tables._floor_line(rates(6_000.0), top, met=False)
    assert "20% (1 process), 20% (2 processes)" in below and "whatever the handlers do" in below
    above = crs_tables._floor_line(rates(15_000.0), top, met=False)
    assert "50% (1 process)" in above and "the handlers' work is what misses it" in above
    met = crs_tables._floor_line(rates(15_000.0), top, met=True)  # no miss to explain
    assert "50% (1 process)" in met and "miss" not in met
