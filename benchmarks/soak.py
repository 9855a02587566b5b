"""The soak: `blackbox load` at the paper's baseline mix for half an hour against a `services` serve
with two API processes, the serve's memory sampled, then a minute well past saturation to see how
fast the overload is answered. Written to BENCHMARKS.md between markers of its own (a full bench
keeps the block; `blackbox bench --soak MINUTES` replaces it), its figures to benchmarks/soak.json
and its chart to benchmarks/plots/soak.png."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt
from rich.console import Console

from adapters.factory import migrate
from api.requests import MAX_IN_FLIGHT
from benchmarks import marked
from benchmarks.crs import drop_documents
from benchmarks.isolation import environment, isolated
from loadgen.run import LoadConfig
from loadgen.run import run as run_load
from local_runtime.process import Serve

Progress = Callable[[str], None]
# the paper's baseline: 350-800 requests/s, of which 30-50 are crash reports and the rest session
# events, one a request; Blackbox's scores come on top. Its crash data at baseline is 250 KB/s, some
# 6 KB a report (its 100 KB average includes the spikes' large dumps); 100 KB for half an hour would
# also be 6 GB in CouchbaseMock, which keeps every document in its heap and has 6 GB
RATE = 350.0
MIX = (0.1, 0.85, 0.05)
CRASH_KB = 8
WORKERS = 2
OVERLOAD_FACTOR = 8
OVERLOAD_S = 60.0
P99_TARGET_MS = 250.0
BEGIN, END = "<!-- soak -->", "<!-- /soak -->"


def run(minutes: float, output: Path, progress: Progress) -> None:
    """Runs the soak and the overload minute, and writes their block into `output`."""
    # when it ran: a soak's block is replaced on its own, apart from the full bench's date
    results: dict[str, Any] = {"startedAt": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")}
    json_path = output.parent / "benchmarks" / "soak.json"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    with isolated("services") as settings:
        migrate(settings)
        serve = Serve(settings.data_dir / "serve", settings.data_dir / "serve.log", "services",
                      environment(settings), workers=WORKERS)
        serve.start()
        assert serve.process is not None
        try:
            for name, rate, seconds in (("soak", RATE, minutes * 60),
                                        ("overload", RATE * OVERLOAD_FACTOR, min(OVERLOAD_S, minutes * 60))):
                progress(f"soak: {name}, {rate:g} requests/s for {seconds:g} s")
                config = LoadConfig(url=serve.url, rate=rate, duration_s=seconds, mix=MIX, batch=1, crash_kb=CRASH_KB,
                                    watch_pid=serve.process.pid, verify_timeout_s=600)
                results[name] = run_load(config, Console(stderr=True, quiet=True)).as_json()
                results[name]["roles"] = _roles(serve)
                json_path.write_text(json.dumps(results, indent=1) + "\n")  # kept if what follows fails
                drop_documents(settings)
        finally:
            serve.stop()
    plot(results["soak"], output.parent / "benchmarks" / "plots" / "soak.png")
    text = output.read_text() if output.exists() else ""
    output.write_text(marked.put(text, BEGIN, END, section(results, minutes)))


def _roles(serve: Serve) -> dict[str, str]:
    """Each process id of the serve (as it runs now) by what it does."""
    assert serve.process is not None
    return {str(serve.process.pid): "supervisor"} | {
        str(pid): f"{'API' if kind == 'api' else 'consumers'} {n}"
        for kind in ("api", "consumers") for n, pid in enumerate(serve.pids(kind))}


def _growth_by_process(run: dict[str, Any]) -> str:
    """Each process's level after the warm-up and its peak after it, by role, largest growth first."""
    found = run["serverMemory"].get("byProcess", {})
    roles = run.get("roles", {})
    rows = sorted(((roles.get(pid, f"pid {pid}"), memory) for pid, memory in found.items() if memory),
                  key=lambda row: -row[1]["peakAfterMB"] + row[1]["levelMB"])
    return "; ".join(f"{role} {m['levelMB']:g} → {m['peakAfterMB']:g} MB ({m['growth']:+.0%})" for role, m in rows)


def _ms(latency: dict[str, float]) -> str:
    return "-" if not latency.get("count") else f"{latency['p50']:g} / {latency['p95']:g} / {latency['p99']:g}"


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def section(results: dict[str, Any], minutes: float) -> str:
    soak, overload = results["soak"], results["overload"]
    memory = soak["serverMemory"]
    crashes, sessions, scores = MIX
    p99 = soak["requestLatencyMs"]["all"].get("p99", float("inf"))
    below = soak["shed"]["requests"] == 0  # a soak that shed was not below saturation
    shed = overload["shed"]
    lines = [
        f"## Soak: {minutes:g} minutes at the paper's baseline mix", "",
        f"`blackbox bench --soak {minutes:g}`: `blackbox load` against `serve --profile services --workers {WORKERS}`, "
        f"{RATE:g} requests/s (the paper's baseline is 350-800, 30-50 of them crash reports), "
        f"{crashes:.0%} crash reports ({CRASH_KB} KB on average, the paper's baseline), {sessions:.0%} single "
        f"session events, {scores:.0%} "
        "single scores; the serve's memory (PSS of the supervisor and its workers) sampled every second. Then "
        f"{OVERLOAD_S:g} s at x{OVERLOAD_FACTOR} that rate, past what this machine takes. Run on "
        f"{results.get('startedAt', 'a date not recorded')}.", "",
        "| | soak | overload |", "|---|---:|---:|",
        f"| offered requests/s | {soak['baseRate']:g} | {overload['baseRate']:g} |",
        f"| acknowledged requests/s | {soak['throughput']:g} | {overload['throughput']:g} |",
        f"| accepted, ms p50 / p95 / p99 | {_ms(soak['requestLatencyMs']['all'])} | "
        f"{_ms(overload['requestLatencyMs']['all'])} |",
        f"| shed answers (503 + Retry-After), ms p50 / p95 / p99 | {_ms(soak['shed']['latencyMs'])} | "
        f"{_ms(shed['latencyMs'])} |",
        f"| the load generator's own lag (each try's latency above holds it), ms p50 / p95 / p99 | "
        f"{_ms(soak.get('clientLagMs', {}))} | {_ms(overload.get('clientLagMs', {}))} |",
        f"| requests shed at least once / still shed after 5 tries | {soak['shed']['requests']} / "
        f"{soak['shed']['gaveUp']} | {shed['requests']} / {shed['gaveUp']} |",
        f"| receive to queryable, ms p50 / p95 / p99 | {_ms(soak['visibilityLatencyMs'])} | "
        f"{_ms(overload['visibilityLatencyMs'])} |",
        f"| lost / duplicated | {soak['lost']} / {soak['duplicated']} | "
        f"{overload['lost']} / {overload['duplicated']} |",
        f"| server memory (PSS), MB: level after warm-up / peak / end | {_memory(soak)} | {_memory(overload)} |",
        "",
        f"- Memory flat within 10% after the warm-up (the first {memory['warmUpS']:g} s): {_verdict(memory['flat'])} "
        f"(peak {memory['growth']:+.0%} on the level after the warm-up, the median of the next "
        f"{memory['warmUpS']:g} s; the check after the load, which reads every report back, peaked at "
        f"{memory['checkPeakMB']:g} MB). By process, level after the warm-up → peak: {_growth_by_process(soak)}.",
        f"- Nothing lost: {_verdict(soak['lost'] == 0 and overload['lost'] == 0)}; below saturation (nothing shed: "
        f"{'yes' if below else 'no'}), p99 of accepted requests under {P99_TARGET_MS:g} ms: {p99:g} ms "
        f"{_verdict(below and p99 < P99_TARGET_MS)}.",
        _overload_line(overload), "",
        "![soak](benchmarks/plots/soak.png)", "",
    ]
    return "\n".join(lines)


def _overload_line(overload: dict[str, Any]) -> str:
    shed = overload["shed"]
    answered = {status for kind in overload["statuses"].values() for status in kind}
    kept_up = answered == {"202"} and overload["throughput"] >= 0.95 * overload["baseRate"]
    if not shed["answers"] and (kept_up or overload["clientOverflow"]):
        return (f"- Past saturation, a fast 503: **not measured**. Nothing was shed at {overload['baseRate']:g} "
                f"requests/s offered ({overload['throughput']:g} acknowledged, {overload['clientOverflow']} not sent "
                "for the client's own limit): the load generator, on the same cores, did not take serve past "
                "saturation.")
    if not shed["answers"]:
        return (f"- Past saturation, a fast 503: **missed**: at {overload['baseRate']:g} requests/s offered serve "
                f"acknowledged {overload['throughput']:g} and shed none (answers: {overload['statuses']}).")
    p95 = shed["latencyMs"]["p95"]
    lag = overload.get("clientLagMs", {})
    overflow = overload["clientOverflow"]
    behind = (f" The load generator, on the same cores, fell behind its own schedule by {lag['p50']:g} / "
              f"{lag['p95']:g} ms (p50 / p95), which that latency holds"
              + (f", and did not send {overflow} requests for its in-flight limit." if overflow else ".")
              if lag.get("count") else "")
    return (f"- Past saturation, the p95 of a shed answer: {p95:g} ms (target: within milliseconds, say ≤ 100): "
            f"{_verdict(p95 <= 100)}.{behind}{_waiting(overload)}")


def _waiting(overload: dict[str, Any]) -> str:
    """How many tries waited for an answer at once, by Little's law: answers a second times their
    mean latency. A 503 is fast only while serve answers every try as it comes; past what it (and
    the client on the same cores) can answer, tries wait unread in its sockets, shed or not."""
    accepted, shed = overload.get("requestLatencyMs", {}).get("all", {}), overload["shed"]
    if not accepted.get("count") or not overload.get("elapsedS"):
        return ""
    answers = accepted["count"] + shed["answers"]
    per_second = answers / overload["elapsedS"]
    mean_s = (accepted["mean"] * accepted["count"] + shed["latencyMs"]["mean"] * shed["answers"]) / answers / 1000
    held, bound = per_second * mean_s, WORKERS * MAX_IN_FLIGHT
    unread = (f", where serve's {WORKERS} API processes hold {bound:,} in their handlers at most: the rest waited "
              "unread in its sockets or in the client's own lag" if held > bound else "")
    return (f" Serve answered {per_second:,.0f} tries a second in all, acknowledged or shed, where "
            f"{overload['baseRate']:,.0f} a second were due, and retries on top: {held:,.0f} tries waited for an "
            f"answer at once on average (that rate times their mean latency, {mean_s * 1000:,.0f} ms){unread}. A "
            "503 is only fast while every try is answered as it comes.")


def _memory(run: dict[str, Any]) -> str:
    memory = run.get("serverMemory")
    return "-" if not memory else f"{memory['levelMB']:g} / {memory['peakAfterMB']:g} / {memory['atEndMB']:g}"


def plot(soak: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure, (throughput, latency, memory) = plt.subplots(3, 1, figsize=(9, 7), sharex=True)
    throughput.plot(soak["throughputPerSecond"])
    throughput.set(ylabel="acknowledged/s", title=f"Soak: {soak['baseRate']:g} requests/s offered")
    windows = soak["p99LatencyMsPer10s"]
    latency.plot([10 * i for i in range(len(windows))], [ms if ms is not None else float("nan") for ms in windows])
    latency.axhline(P99_TARGET_MS, color="gray", linestyle="--", linewidth=0.8)
    latency.set(ylabel="p99 ms (10 s)")
    samples = soak["serverMemory"]["samples"]
    memory.plot([t for t, _ in samples], [rss / 2**20 for _, rss in samples])
    memory.axvline(soak["serverMemory"]["warmUpS"], color="gray", linestyle="--", linewidth=0.8)
    memory.set(ylabel="serve PSS MB", xlabel="second of the run", ylim=(0, None))
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
