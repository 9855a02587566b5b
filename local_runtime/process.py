"""`blackbox serve` as a child process on a free port: for end-to-end tests and the benchmarks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Serve:
    def __init__(self, data_dir: Path, log_path: Path, profile: str = "embedded",
                 env: dict[str, str] | None = None, host: str = "127.0.0.1") -> None:
        self.host = host
        self.data_dir = data_dir
        self.log_path = log_path
        self.profile = profile
        self.env = os.environ | (env or {})
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        command = [sys.executable, "-m", "local_runtime.cli", "serve", "--host", self.host, "--port", str(self.port),
                   "--data-dir", str(self.data_dir), "--profile", self.profile]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"serve exited with {self.process.returncode}: {self.log_path.read_text()}")
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError("serve did not become healthy in 30 s")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.process is not None
        self.process.send_signal(sig)
        code = self.process.wait(timeout=60)
        self.process = None
        return code
