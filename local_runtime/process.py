"""`blackbox serve` as a child process on a free port: for end-to-end tests and the benchmarks."""

from __future__ import annotations

import os
import re
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


PORT_TRIES = 3


class Serve:
    def __init__(self, data_dir: Path, log_path: Path, profile: str = "embedded",
                 env: dict[str, str] | None = None, host: str = "127.0.0.1", *, role: str = "all",
                 workers: int | None = None) -> None:
        self.host = host
        self.role = role
        self.workers = workers
        self.data_dir = data_dir
        self.log_path = log_path
        self.profile = profile
        self.env = os.environ | (env or {})
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._log_start = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        # free_port lets its port go before serve binds it: another process may take it meanwhile
        for _ in range(PORT_TRIES):
            if self._started():
                return
            self.port = free_port()
        raise RuntimeError(f"serve found its port taken {PORT_TRIES} times")

    def _started(self) -> bool:
        """True once serve is up; False if its port was taken."""
        command = [sys.executable, "-m", "cli.main", "serve", "--host", self.host, "--port", str(self.port),
                   "--data-dir", str(self.data_dir), "--profile", self.profile, "--role", self.role]
        command += ["--workers", str(self.workers)] if self.workers else []
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                if f"port {self.port} on {self.host} is in use" in self._log_since_start():
                    return False
                raise RuntimeError(f"serve exited with {self.process.returncode}: {self.log_path.read_text()}")
            if self._ready():
                return True
            time.sleep(0.1)
        raise RuntimeError("serve did not become healthy in 30 s")

    def _ready(self) -> bool:
        if self.role == "consumers":  # nothing to ask: started once it says so
            return bool(self.pids("consumers"))
        if not self.pids("api"):  # announced once its socket is bound: another's may answer before
            return False
        try:
            return httpx.get(f"{self.url}/v1/health", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def pids(self, kind: str) -> list[int]:
        """The process ids of this serve's `kind` workers (api, consumers) as it runs now: those it
        announced, with the one it started in place of each that died."""
        text = self._log_since_start()
        announced = re.search(rf"^  processes .*?; {'API' if kind == 'api' else kind} ([\d, ]+)", text, re.M)
        pids = [int(pid) for pid in announced.group(1).split(", ")] if announced else []
        for again, dead in re.findall(r" again as pid (\d+), in place of pid (\d+)", text):
            pids = [int(again) if pid == int(dead) else pid for pid in pids]
        return pids

    def _log_since_start(self) -> str:
        with self.log_path.open("rb") as log:
            log.seek(self._log_start)
            return log.read().decode(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.process is not None
        self.process.send_signal(sig)
        code = self.process.wait(timeout=60)
        self.process = None
        return code
