"""Serve's supervisor stops its workers with SIGTERM and waits for what they have in flight, but
not for ever: a worker whose thread is stuck in C holding the GIL (librdkafka's close of a consumer
its group put out, seen in CI) never runs its signal handler, and serve's own stop hung with it."""

from __future__ import annotations

import multiprocessing
import signal
import time
from pathlib import Path

from adapters.settings import Settings
from local_runtime.server import Job, Supervisor, stopped


def _failing() -> None:
    """Stops on SIGTERM, as a worker does, but with an error on the way out."""
    def fail(*_: object) -> None:
        raise SystemExit(1)
    signal.signal(signal.SIGTERM, fail)
    time.sleep(60)


def _deaf() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(60)


def test_a_worker_that_does_not_stop_after_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    spawn = multiprocessing.get_context("spawn")
    supervisor = Supervisor(Settings(profile="embedded", data_dir=tmp_path), None, [])
    deaf, polite, failing = (spawn.Process(target=_deaf), spawn.Process(target=time.sleep, args=(60,)),
                             spawn.Process(target=_failing))
    for slot, process in enumerate((deaf, polite, failing)):
        process.start()
        supervisor.running[Job("consumers", slot)] = (process, time.monotonic())
    time.sleep(1.0)  # the deaf one has set its handler
    started = time.monotonic()
    supervisor.stop_all(grace_s=1.0)
    assert time.monotonic() - started < 10
    assert deaf.exitcode == -signal.SIGKILL
    assert polite.exitcode == -signal.SIGTERM
    assert failing.exitcode == 1
    # found from outside: serve then said every consumed batch was committed, also (found in review) of a
    # worker that exited with an error while it stopped
    assert supervisor.unfinished == {Job("consumers", 0): "had not stopped 1 s after SIGTERM, so was killed",
                                     Job("consumers", 1): "was killed by SIGTERM",
                                     Job("consumers", 2): "exited with code 1"}
    line = stopped("all", supervisor.unfinished)
    assert "every consumed batch is committed" not in line
    assert "consumers worker 2 exited with code 1" in line


def test_serve_says_its_batches_are_committed_only_when_every_worker_stopped_cleanly() -> None:
    assert stopped("all", {}) == "Blackbox stopped; every consumed batch is committed"
    assert stopped("api", {}) == "Blackbox stopped"
