"""A uvicorn server on a thread, for tests that drive the local gateway over real HTTP."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn


@contextmanager
def running(config: uvicorn.Config) -> Iterator[int]:
    """Serves `config` until the block ends; yields its port once it accepts connections."""
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive()
        time.sleep(0.01)
    try:
        yield config.port
    finally:
        server.should_exit = True
        thread.join()
