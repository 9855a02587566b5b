"""`blackbox load --profile spike` against a running serve, on both profiles: every accepted event
is accounted for (lost = 0) and the report says so, as text and JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from local_runtime.process import Serve


def test_a_spike_loses_nothing(serve: Serve, tmp_path: Path):
    out = tmp_path / "load.json"
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "load", "--url", serve.url, "--profile", "spike", "--rate", "8",
         "--duration", "10", "--crash-kb", "20", "--json", str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    assert result["lost"] == 0 and result["duplicated"] == 0
    assert result["crashes"]["accepted"] == result["crashes"]["found"] > 0
    assert result["sessions"]["accepted"] == result["sessions"]["counted"] > 0
    assert result["scores"]["players"] == result["scores"]["ranked"] > 0
    assert result["requests"] > 8 * 10 * 3  # the spike happened: x10 for 4 of the 10 s
    assert result["visibilityLatencyMs"]["count"] == result["crashes"]["accepted"]
    assert "lost = 0" in done.stdout
