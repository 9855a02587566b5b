"""`blackbox bench`: runs the sections and writes BENCHMARKS.md with the machine they ran on,
keeping its blocks written apart: the soak's, and what was measured by hand (between BY_HAND_BEGIN
and BY_HAND_END: turns of two checkouts, datasets no bench loads), which a bench cannot redo."""

from __future__ import annotations

import os
import platform
import subprocess
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from benchmarks import crs, crs_tables, marked, minidumps, ranking, releases, soak
from pipeline.collector import collect_for_batches

BY_HAND_BEGIN, BY_HAND_END = "<!-- by hand -->", "<!-- /by hand -->"


def _machine() -> str:
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mariadb = subprocess.run(["mariadbd", "--version"], capture_output=True, text=True, check=False).stdout.strip()
    return (f"{os.cpu_count()} cores ({cpu}), {memory_gib:.0f} GiB, Python {platform.python_version()}, "
            f"{mariadb or 'MariaDB version unknown'}")


def run(quick: bool, output: Path) -> None:
    # the sections run the consumers' code in this process: with the collector as their functions
    # set it in theirs, from the start (importing one of them would set it midway), for the load
    # generator and the queries' clients in this process too
    collect_for_batches()
    console = Console()
    with console.status("benchmarking") as status:
        def progress(message: str) -> None:
            status.update(message)

        plan = crs.Plan.for_run(quick)
        logs = Path(tempfile.gettempdir())  # each serve's log, for when a section fails
        results = [crs.run_profile(profile, plan, progress, logs) for profile in ("embedded", "services")]
        sections = [*crs_tables.section(results, plan, output.parent / "benchmarks" / "plots"),
                    *minidumps.run(150 if quick else 600, progress),
                    *ranking.run(ranking.Plan.for_run(quick), progress),
                    *releases.run(releases.Plan.for_run(quick), progress)]
    command = "blackbox bench" + (" --quick" if quick else "")
    text = "\n".join([
        "# Benchmarks",
        "",
        f"Measured by `{command}` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, on {_machine()}. Every",
        "comparison in a table was measured in the same run, so ratios hold on a shared machine even",
        "when absolute times drift. Rerun: `scripts/services start && .venv/bin/blackbox bench`",
        "(`--quick` for a short run).",
        "",
        *sections,
    ])
    output.write_text(document(text, output.read_text() if output.exists() else None))
    console.print(text)


def document(generated: str, previous: str | None) -> str:
    """A full bench's report: its `generated` sections, then the blocks of the `previous` report
    that it keeps (the soak is a run of its own, half an hour long)."""
    kept = [block for block in (marked.find(previous or "", soak.BEGIN, soak.END),
                                marked.find(previous or "", BY_HAND_BEGIN, BY_HAND_END)) if block]
    return "\n".join([f"{generated.rstrip()}\n", *kept]) if kept else generated


def soak_only(minutes: float, output: Path) -> None:
    with Console().status("soak") as status:
        soak.run(minutes, output, status.update)
