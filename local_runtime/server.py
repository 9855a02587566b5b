"""`blackbox serve`: the API behind the local gateway, and every consumer behind a poller, in one
process until SIGINT/SIGTERM; then the in-flight batches finish and are committed."""

from __future__ import annotations

import fcntl
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn

from adapters.factory import Settings, build, install, migrate
from local_runtime.functions import CONSUMERS, load_handler
from local_runtime.gateway import Gateway, http_config
from local_runtime.periodic import purger, spill_replayer
from local_runtime.poller import Poller


class DataDirInUse(RuntimeError):
    pass


class _Server(uvicorn.Server):
    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn re-raises SIGINT/SIGTERM once it has stopped, which would kill the process before
        the pollers finish their batches; here the signal only stops the server."""
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def lock_data_dir(data_dir: Path) -> int:
    """One serve per data directory: two would both consume the same topics (and `blackbox invoke`
    takes it too, unless told to run beside a live serve)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_dir / "serve.lock", os.O_CREAT | os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise DataDirInUse(f"another blackbox serve is using {data_dir}") from None
    return fd


LOOPBACK = ("127.0.0.1", "::1", "localhost")


def serve(settings: Settings, host: str, port: int) -> None:
    lock = lock_data_dir(settings.data_dir)
    # metrics are for CloudWatch; here the log line of an alert is enough (set it to false to see them)
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    migrate(settings)  # as the AWS deployment's custom resource does before the functions run
    adapters = build(settings)
    install(adapters)
    stop = threading.Event()
    pollers = [Poller(adapters.log, name, topic, load_handler(name), stop) for name, topic in CONSUMERS.items()]
    for poller in pollers:
        poller.start()
    jobs = [spill_replayer(adapters, stop), purger(adapters, stop)]
    for job in jobs:
        job.start()
    keys = settings.api_keys
    if keys.configured:
        print(f"API keys: {len(keys.ingest)} ingest, {len(keys.server)} server, {len(keys.read)} read", flush=True)
    elif host not in LOOPBACK:
        print(f"No API keys configured (BLACKBOX_API_KEYS__INGEST/SERVER/READ): serving on 127.0.0.1 only, "
              f"not {host}", flush=True)
        host = "127.0.0.1"
    server = _Server(http_config(Gateway(keys), host, port))
    print(f"Blackbox serving on http://{host}:{port} ({settings.profile}, data in {settings.data_dir})", flush=True)
    try:
        server.run()  # returns after SIGINT/SIGTERM, once in-flight requests are answered
    finally:
        stop.set()
        for poller in pollers:
            poller.join()
        for job in jobs:
            job.join()
        adapters.close()
        install(None)
        os.close(lock)  # releases the lock
    print("Blackbox stopped; every consumed batch is committed", flush=True)
