"""`blackbox bench`'s ranking section runs end to end on a tiny plan and reports every table.
Its figures are not asserted here (they are measurements, written to BENCHMARKS.md), only that
the run completes, the three rank methods agree, and no probe update went missing."""

from __future__ import annotations

from benchmarks import ranking


def test_ranking_section_runs_on_a_tiny_plan():
    plan = ranking.Plan(worker_updates=400, naive_updates=40, sizes=(300,), rank_queries=10, visible_rate=500,
                        visible_seconds=1.5)
    messages: list[str] = []
    lines = ranking.run(plan, messages.append)
    text = "\n".join(lines)
    assert "### Worker throughput" in text and "### Rank query latency" in text and "### Update-to-visible" in text
    visible_row = next(line for line in lines if line.startswith("| 500/s"))
    assert visible_row.split("|")[4].strip() == "0"  # probes not seen
    assert any(m.startswith("rank: loading") for m in messages)
