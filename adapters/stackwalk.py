"""Minidumps read by rust-minidump (the stack walker Socorro and Sentry run): `blackbox-stackwalk`
(stackwalk/, its minidump-processor behind a small main, printing `minidump-stackwalk --json`'s
report), symbolicated with Breakpad `.sym` files kept in the symbol-server layout
(`<debug file>/<debug id>/<debug file less .pdb>.sym`).

The walker is a separate process on purpose: a minidump is untrusted input, so it runs with a
budget of CPU time and a cap on what it may print, and whatever it does with a hostile dump, the
caller gets a `WalkFailed` with the reason instead of a crash or a hang. A deadline of wall time
is the machine's, not the dump's: a crash flood leaves the consumers (at nice 10) a sliver of
busy cores, and a walk that outlasts it raises WalkLate, its report to be walked again later."""

from __future__ import annotations

import contextlib
import os
import resource
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from pydantic import ValidationError

from ports.minidumps import MAX_FRAMES, WALK_WALL_S, Walked, WalkerReport, WalkFailed, WalkLate

WALKER = "blackbox-stackwalk"
# `make test` builds it here (the Makefile's .tools/bin/blackbox-stackwalk)
_REPO_WALKER = Path(__file__).resolve().parents[1] / ".tools" / "bin" / WALKER
WALKER_ENV = "BLACKBOX_STACKWALK"
# the walker's exit code for a minidump it cannot read or walk (stackwalk/src/main.rs)
UNREADABLE = 3


class WalkerBroken(RuntimeError):
    """The walker could not run: no minidump's fault, so no report is marked failed for it."""


# the memory a walk may take (RLIMIT_DATA: its heap and private mappings): a 96 KB dump whose 110
# threads share one stack of return addresses took 6.4 GB, where a game's dump and its symbols take
# tens of MB; the walker's Lambda has 1,769 MB for it and the Python beside it
MEMORY_BYTES = 1 << 30


class Stackwalker:
    """Runs the walker on one minidump at a time."""

    def __init__(self, binary: Path, *, cpu_s: int = 20, timeout_s: float = WALK_WALL_S,
                 max_output_bytes: int = 32 << 20, memory_bytes: int = MEMORY_BYTES) -> None:
        self.binary = binary
        self.cpu_s = cpu_s
        self.memory_bytes = memory_bytes
        self.timeout_s = timeout_s
        self.max_output_bytes = max_output_bytes

    @classmethod
    def installed(cls) -> Stackwalker:
        """The walker named by BLACKBOX_STACKWALK, else the repository's (`make test` builds it),
        else the one on PATH."""
        named = os.environ.get(WALKER_ENV)
        if named:
            return cls(Path(named))
        if _REPO_WALKER.exists():
            return cls(_REPO_WALKER)
        on_path = shutil.which(WALKER)
        if on_path is None:
            raise FileNotFoundError(f"{WALKER}: set {WALKER_ENV}, or run `make .tools/bin/{WALKER}`")
        return cls(Path(on_path))

    def walk(self, minidump: bytes, symbols: Path) -> Walked | WalkFailed:
        """Walks the crashing thread of `minidump`, with the `.sym` files under `symbols`
        (symbol-server layout; an empty or missing directory walks without symbols)."""
        with tempfile.TemporaryDirectory(prefix="blackbox-stackwalk-") as scratch:
            dump = Path(scratch) / "crash.dmp"
            dump.write_bytes(minidump)
            ran = self._run([str(self.binary), str(dump), str(symbols)])
        if isinstance(ran, WalkFailed):
            return ran
        code, out, err = ran
        if code == UNREADABLE:
            return WalkFailed(_last_line(err) or f"{WALKER}: the minidump could not be read")
        if code == -signal.SIGXCPU:  # its soft limit of CPU time (RLIMIT_CPU), the dump's doing
            return WalkFailed(f"{WALKER} used more than {self.cpu_s} s of CPU on this minidump")
        if code == -signal.SIGABRT and b"memory allocation" in err:  # Rust's abort past RLIMIT_DATA
            return WalkFailed(f"{WALKER} used more than {self.memory_bytes >> 20} MiB of memory on this minidump")
        if code < 0:  # a signal: a panic (abort) or the kernel's, on this dump
            return WalkFailed(f"{WALKER} died on this minidump (signal {-code})")
        if code != 0:
            # not the dump's doing (a walker that cannot load, or was called wrong): the batch is
            # tried again rather than the report marked failed for a deployment's fault
            raise WalkerBroken(f"{WALKER} exited with {code}: {_last_line(err)}")
        try:
            report = WalkerReport.model_validate_json(out)
        except ValidationError as invalid:
            return WalkFailed(f"{WALKER} printed an unexpected report: {invalid.errors()[0]['msg']}")
        if report.status not in (None, "OK"):
            return WalkFailed(f"{WALKER}: {report.status}")
        if report.crashing_thread is None:
            return WalkFailed("the minidump names no crashing thread")
        return Walked(
            crash_reason=report.crash_info.type,
            crash_address=report.crash_info.address,
            frames=report.crashing_thread.frames[:MAX_FRAMES],
            modules=report.modules,
        )

    def _run(self, command: list[str]) -> tuple[int, bytes, bytes] | WalkFailed:
        """The command's exit code and output, read as it comes so that neither the deadline nor
        the output cap can be outrun."""
        deadline = time.monotonic() + self.timeout_s
        with subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        ) as walker:
            assert walker.stdout is not None and walker.stderr is not None
            try:
                self._limit(walker.pid)
            except BaseException:
                walker.kill()  # else leaving the block would wait for it, unbounded
                raise
            out, err = walker.stdout.fileno(), walker.stderr.fileno()
            output = {out: bytearray(), err: bytearray()}
            with selectors.DefaultSelector() as selector:
                for fd in output:
                    selector.register(fd, selectors.EVENT_READ)
                while selector.get_map():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        walker.kill()
                        raise self._late()
                    for key, _ in selector.select(left):
                        chunk = os.read(key.fd, 1 << 16)
                        if not chunk:
                            selector.unregister(key.fd)
                        output[key.fd] += chunk
                    if len(output[out]) + len(output[err]) > self.max_output_bytes:
                        walker.kill()
                        return WalkFailed(f"{WALKER} printed more than {self.max_output_bytes} bytes")
            try:
                code = walker.wait(max(deadline - time.monotonic(), 0))
            except subprocess.TimeoutExpired:
                walker.kill()
                raise self._late() from None
            return code, bytes(output[out]), bytes(output[err])

    def _limit(self, pid: int) -> None:
        """The walker's budget of CPU time and memory, and no core file when one is spent (SIGXCPU's
        and SIGABRT's default action dumps one). Set from here, not in the child (preexec_fn is
        unsafe beside threads): the CPU limit counts what the process has used since it started,
        and the memory one what it holds, so none escapes them."""
        with contextlib.suppress(ProcessLookupError):  # done already
            resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
            resource.prlimit(pid, resource.RLIMIT_DATA, (self.memory_bytes, self.memory_bytes))
            _, hard = resource.prlimit(pid, resource.RLIMIT_CPU)
            top = self.cpu_s + 1 if hard == resource.RLIM_INFINITY else min(self.cpu_s + 1, hard)
            resource.prlimit(pid, resource.RLIMIT_CPU, (min(self.cpu_s, top), top))

    def _late(self) -> WalkLate:
        return WalkLate(f"{WALKER} took longer than {self.timeout_s:g} s within its {self.cpu_s} s of CPU: "
                        "the machine is busy")


def _last_line(stderr: bytes) -> str:
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1][:500] if lines else ""
