"""`blackbox serve` stops however many times it is told to: `make serve` stopped by a terminal or
a test sends SIGTERM to the whole process group, so the supervisor and each worker get it from
there, from make and from the supervisor, in any order and while a handler still runs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from local_runtime.process import Serve

BURST_S = 10.0
STOPPED = "Blackbox stopped; every consumed batch is committed"


# SIGTERM to every process, as `kill` of the process group; SIGINT (Ctrl-C) to the supervisor, which
# answers it (workers ignore it once started, and one still importing dies of it, as it may)
@pytest.mark.parametrize("sig, to_workers", [(signal.SIGTERM, True), (signal.SIGINT, False)])
def test_a_burst_of_signals_stops_serve_and_every_worker(tmp_path: Path, sig: signal.Signals,
                                                          to_workers: bool) -> None:
    server = Serve(tmp_path / "data", tmp_path / "serve.log", workers=2)
    server.start()
    assert server.process is not None
    process = server.process
    log = tmp_path / "serve.log"
    workers = server.pids("api") + server.pids("consumers")
    assert len(workers) == 3
    try:
        # until serve says it has stopped: signals land inside the handlers, and while it stops
        deadline = time.monotonic() + BURST_S
        while STOPPED not in log.read_text() and time.monotonic() < deadline:
            for pid in [process.pid, *workers] if to_workers else [process.pid]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        assert process.wait(timeout=60) == 0
    except subprocess.TimeoutExpired:
        for pid in [process.pid, *workers]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        raise
    text = log.read_text()
    assert text.rstrip().endswith(STOPPED), text
    assert "Traceback" not in text and "Exception ignored" not in text, text
    for pid in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
