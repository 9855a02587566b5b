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

import httpx
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


def _listening(port: int) -> str:
    """The `socket:[inode]` of the socket listening on this port of 127.0.0.1."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == f"0100007F:{port:04X}" and fields[3] == "0A":  # 0A: LISTEN
            return f"socket:[{fields[9]}]"
    raise AssertionError(f"nothing listens on port {port}")


def _held(pid: int) -> set[str]:
    held = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):  # closed meanwhile
            held.add(os.readlink(fd))
    return held


def test_only_the_api_workers_hold_the_listening_socket(tmp_path: Path) -> None:
    """Found by a probe of docs/scale-out.md: the consumers workers held it too, accepting nothing.
    One that took its 30 s to finish a batch at a stop kept the port from a serve started again, and
    let clients connect to a socket nothing would accept on."""
    server = Serve(tmp_path / "data", tmp_path / "serve.log", workers=1)
    server.start()
    try:
        listening = _listening(server.port)
        assert listening in _held(server.pids("api")[0])
        consumers = server.pids("consumers")[0]
        # it has its arguments, the socket among them if it were sent, once it reads the log
        deadline = time.monotonic() + 30
        while not any(held.startswith(str(server.data_dir)) for held in _held(consumers)):
            assert time.monotonic() < deadline, _held(consumers)
            time.sleep(0.1)
        assert listening not in _held(consumers)
    finally:
        server.stop()


def test_each_worker_is_named_by_its_job_in_ps(tmp_path: Path) -> None:
    """docs/scale-out.md has an operator kill a worker by its pid: `ps` and `top` must tell which is
    which, where every worker showed multiprocessing's own command line."""
    server = Serve(tmp_path / "data", tmp_path / "serve.log", workers=1)
    server.start()
    try:
        for kind, job in (("api", "API worker 0"), ("consumers", "consumers worker 0")):
            cmdline = Path(f"/proc/{server.pids(kind)[0]}/cmdline")
            deadline = time.monotonic() + 30
            while not cmdline.read_bytes().startswith(b"blackbox serve: "):
                assert time.monotonic() < deadline, cmdline.read_bytes()
                time.sleep(0.1)
            assert cmdline.read_bytes().rstrip(b"\0").decode() == f"blackbox serve: {job}"
    finally:
        server.stop()


def test_sigusr1_writes_every_workers_threads_to_the_log_and_stops_nothing(tmp_path: Path) -> None:
    """A consumer that stopped moving without an error (the fault suite once saw the ranking worker's
    leaderboards short of accepted scores) says nothing in the log: SIGUSR1 to serve shows where
    each thread of each worker waits, and every worker goes on."""
    server = Serve(tmp_path / "data", tmp_path / "serve.log", workers=1)
    server.start()
    assert server.process is not None
    workers = server.pids("api") + server.pids("consumers")
    try:
        deadline = time.monotonic() + 30
        # a consumers worker's poller and the API worker's server (once the worker has made its
        # pollers: until then its stack shows it making them)
        while not all(f in server.log_path.read_text() for f in ("local_runtime/poller.py", "uvicorn/server.py")):
            assert time.monotonic() < deadline, server.log_path.read_text()
            os.kill(server.process.pid, signal.SIGUSR1)
            time.sleep(1)
        dumped = server.log_path.read_text().count("(most recent call first)")
        assert dumped > len(workers)
        os.kill(server.pids("consumers")[0], signal.SIGUSR1)  # a worker's own
        while server.log_path.read_text().count("(most recent call first)") == dumped:
            assert time.monotonic() < deadline, server.log_path.read_text()
            time.sleep(0.1)
        time.sleep(1)  # serve looks for dead workers every 0.2 s
        assert httpx.get(f"{server.url}/v1/health", timeout=5).status_code == 200
        assert server.pids("api") + server.pids("consumers") == workers
        assert "starting it again" not in server.log_path.read_text()
    finally:
        assert server.stop() == 0
    assert server.log_path.read_text().rstrip().endswith(STOPPED)
