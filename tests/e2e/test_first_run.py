"""What a first run shows: `serve` says where the API and the dashboard are and who may call, and
`blackbox load`'s final check counts down to its deadline with the counts so far."""

from __future__ import annotations

import io
import os
import re
import signal
import threading
from collections.abc import Iterator

import httpx
import pytest
from rich.console import Console

from loadgen.run import LoadConfig, run
from local_runtime.process import Serve
from tests.e2e.conftest import running

# how long the consumers are held back: the run's 2 s of load, then more than 2 s of polls that find nothing
HELD_S = 5.0


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running("embedded", tmp_path_factory.mktemp("first-run")) as server:
        yield server


def test_serve_announces_the_api_the_dashboard_and_open_mode(embedded: Serve):
    announced = embedded.log_path.read_text()
    url = embedded.url
    assert f"API        {url}/v1/…   (try: curl {url}/v1/health)" in announced
    assert f"dashboard  {url}/\n" in announced
    assert "keys       none, so only this machine may call; set BLACKBOX_API_KEYS__INGEST/SERVER/READ" in announced
    page = httpx.get(f"{url}/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")


def test_the_load_check_counts_down_to_its_deadline(embedded: Serve):
    """With the consumers held back for a while, the check polls several times: each poll says what
    it has found so far and the time left, counting down from the first line's 60 s."""
    shown = io.StringIO()
    console = Console(file=shown, force_terminal=True, width=400)
    [consumers] = embedded.pids("consumers")
    os.kill(consumers, signal.SIGSTOP)
    resume = threading.Timer(HELD_S, os.kill, (consumers, signal.SIGCONT))
    resume.start()
    try:
        report = run(LoadConfig(url=embedded.url, rate=10, duration_s=2, crash_kb=5, verify_timeout_s=60), console)
    finally:
        resume.cancel()
        os.kill(consumers, signal.SIGCONT)
    assert report.verification.lost == 0 and report.verification.crashes_accepted > 0
    assert "checking that everything accepted is queryable; gives up in 60 s" in shown.getvalue()
    accepted = report.verification.crashes_accepted
    updates = re.findall(rf"checking that everything accepted is queryable: crashes (\d+)/{accepted}, sessions "
                         r"\d+/\d+, players \d+/\d+; gives up in (\d+) s", shown.getvalue())
    waiting = [int(left) for found, left in updates if found == "0"]
    # the first polls found nothing, early in the minute (on a busy machine the first took 3 s)
    assert waiting and waiting[0] >= 55, updates
    # and counted down while they waited
    assert len(set(waiting)) >= 2 and waiting == sorted(waiting, reverse=True), updates
