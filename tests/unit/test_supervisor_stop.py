"""Serve's supervisor stops its workers with SIGTERM and waits for what they have in flight, but
not for ever: a worker whose thread is stuck in C holding the GIL (librdkafka's close of a consumer
its group put out, seen in CI) never runs its signal handler, and serve's own stop hung with it."""

from __future__ import annotations

import multiprocessing
import signal
import time
from pathlib import Path

from adapters.settings import Settings
from local_runtime.server import Job, Supervisor


def _deaf() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(60)


def test_a_worker_that_does_not_stop_after_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    spawn = multiprocessing.get_context("spawn")
    supervisor = Supervisor(Settings(profile="embedded", data_dir=tmp_path), None, [])
    deaf, polite = spawn.Process(target=_deaf), spawn.Process(target=time.sleep, args=(60,))
    for slot, process in enumerate((deaf, polite)):
        process.start()
        supervisor.running[Job("consumers", slot)] = (process, time.monotonic())
    time.sleep(1.0)  # the deaf one has set its handler
    started = time.monotonic()
    supervisor.stop_all(grace_s=1.0)
    assert time.monotonic() - started < 10
    assert deaf.exitcode == -signal.SIGKILL
    assert polite.exitcode == -signal.SIGTERM
    # found from outside: serve then said every consumed batch was committed
    assert supervisor.killed == [Job("consumers", 0)]
