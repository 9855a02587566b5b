"""`blackbox serve`: a supervisor and its worker processes, until SIGINT/SIGTERM.

API workers accept on one listening socket that the supervisor binds before it starts them (the
pre-fork model of gunicorn and `uvicorn --workers`): the kernel hands each connection to a worker
that is free, and a worker's death loses nothing queued on the socket. Consumer workers run a
poller per consumer function, each a member of that function's consumer group, so on the
services profile any number of them, on any number of machines, share the partitions. On
SIGINT/SIGTERM every worker finishes what it has in flight (requests answered, batches committed)
and serve exits 0; one still running STOP_GRACE_S later is killed (what it had not committed is
delivered again). A worker that dies is reported and started again (a consumers worker killed on
services once its groups have dropped it: Supervisor.restart_in); one that dies within
QUICK_DEATH_S of starting, MAX_QUICK_DEATHS times in a row, stops serve with exit 2."""

from __future__ import annotations

import errno
import faulthandler
import fcntl
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from multiprocessing import resource_tracker
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

import uvicorn
from setproctitle import setproctitle

from adapters.factory import build, data_directory, install, migrate
from adapters.kafka.log import HEARTBEAT_INTERVAL_MS, SESSION_TIMEOUT_MS
from adapters.settings import Settings
from api.access import ApiKeys
from lambdas.functions import CONSUMERS, load_handler
from local_runtime.gateway import Gateway, http_config, return_freed_buffers
from local_runtime.periodic import alert_teller, purger, season_teller, spill_replayer, webhook_sender
from local_runtime.poller import Poller
from ports.errors import UserError

Role = Literal["all", "api", "consumers"]
ROLES: tuple[Role, ...] = get_args(Role)
QUICK_DEATH_S = 10.0
MAX_QUICK_DEATHS = 3
# how often the supervisor looks for dead workers, and a worker for a dead supervisor
WATCH_S = 0.2
# a killed consumers worker's groups drop it this long after its death at the latest: its session
# timeout after its last heartbeat, and a heartbeat for the rebalance that follows
DROPPED_S = (SESSION_TIMEOUT_MS + 2 * HEARTBEAT_INTERVAL_MS) / 1000
# how long a worker has after SIGTERM: a thread stuck in C holding the GIL (librdkafka's close of a
# consumer its group put out) keeps its signal handler from ever running
STOP_GRACE_S = 30.0
# the consumers yield the CPU to the API processes they share it with: past saturation capture
# answers (and sheds) first, and what it took waits on the durable log until the load eases
CONSUMER_NICENESS = 10


class DataDirInUse(UserError):
    pass


class WorkerFailed(UserError):
    pass


class PortInUse(UserError):
    pass


def default_workers() -> int:
    """One worker per CPU this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


# a consumers worker's exit code when it stopped with a commit not confirmed: what it had consumed
# since comes again at the next start
UNCOMMITTED = 3
# the signals that stop serve
_STOPPING = {signal.SIGINT, signal.SIGTERM}
# writes each thread's stack to the log (a worker's own; serve's goes to every worker): where a
# consumer that stopped moving waits. Its default action kills, so it is blocked until handled
DUMP_STACKS = signal.SIGUSR1
_HANDLED = {*_STOPPING, DUMP_STACKS}


class StopRequest:
    """A signal handler's flag. Not a threading.Event: Event.set takes a lock, and a second signal
    arriving while the handler holds it (under `make serve` SIGTERM comes from the process group,
    from make and from the supervisor) deadlocks the process."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: object) -> None:
        self.requested = True

    def wait(self, seconds: float) -> bool:
        """Whether a stop was requested, after `seconds` (a signal does not cut the sleep short)."""
        time.sleep(seconds)
        return self.requested


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, requested: StopRequest) -> None:
        super().__init__(config)
        self._requested = requested

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn re-raises the signal once it has stopped, which would kill the worker before
        its spill replay finishes; here SIGTERM only stops the server, and goes on doing only that
        while the worker finishes (the process group's SIGTERM and the supervisor's both come). One
        that came as the worker started stops it before it serves."""
        signal.signal(signal.SIGTERM, self.handle_exit)
        if self._requested.requested:  # never False: one may have come to handle_exit just now
            self.should_exit = True
        yield


def lock_data_dir(data_dir: Path, fix: str = "stop that serve first, or pass another --data-dir "
                  "(with make: make serve DATA_DIR=another-dir)") -> int:
    """One serve per data directory on the embedded profile: two would both consume the same
    topics (and `blackbox invoke` takes it too, unless told to run beside a live serve)."""
    try:
        fd = os.open(data_directory(data_dir) / "serve.lock", os.O_CREAT | os.O_RDWR)
    except OSError as error:  # not writable by this user, or no place for files (/proc)
        raise UserError(f"{data_dir} cannot be written ({error.strerror})",
                        "pass --data-dir a directory this user can write, made if missing (with make: make serve "
                        "DATA_DIR=that-dir)") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise DataDirInUse(f"another blackbox serve is using {data_dir}", fix) from None
    return fd


def _data_dir_held(data_dir: Path) -> bool:
    """Whether a serve holds `data_dir` now (lock_data_dir's lock, taken and given back at once)."""
    try:
        fd = os.open(data_dir / "serve.lock", os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # which gives the lock back, if taken
    return False


def _bind(host: str, port: int) -> socket.socket:
    return socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)


def _free_port_near(host: str, port: int) -> int:
    """The first port above `port` that this host can listen on, else any free one."""
    for candidate in range(port + 1, min(port + 100, 65536)):
        try:
            _bind(host, candidate).close()
            return candidate
        except OSError:
            continue
    with _bind(host, 0) as any_port:
        free: int = any_port.getsockname()[1]
        return free


def listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound before anything starts or is announced: a taken port is one line
    naming a free one, not an announcement followed by uvicorn's Errno 98."""
    try:
        return _bind(host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            free = _free_port_near(host, port)
            raise PortInUse(f"port {port} on {host} is in use",
                            f"try --port {free} (with make: make serve PORT={free})") from None
        if exc.errno == errno.EACCES:
            free = _free_port_near(host, 8079)
            raise UserError(f"port {port} needs root, as every port below 1024",
                            f"try --port {free} (with make: make serve PORT={free})") from None
        raise UserError(f"cannot listen on {host}:{port} ({exc.strerror or exc})",
                        "pass --host 127.0.0.1 (this machine only) or --host 0.0.0.0 (every interface)") from None

def _address(where: str, default_port: int, tls_port: int | None = None) -> tuple[str, int]:
    """The first host and port of a bootstrap list or an engine's URL (credentials left out); with
    no port, `tls_port` for a URL whose scheme ends in s (couchbases://), else `default_port`."""
    url = urlsplit(where if "://" in where else f"//{where}")
    first = url.netloc.rpartition("@")[2].split(",")[0]
    parsed = urlsplit(f"//{first}")
    unstated = tls_port if tls_port is not None and url.scheme.endswith("s") else default_port
    return parsed.hostname or "127.0.0.1", parsed.port or unstated


def check_engines(settings: Settings, only: Collection[str] | None = None) -> None:
    """On the services profile, each engine (of `only`, by name, when a command uses some) listens
    before a command relies on it; else one line says which does not and how to start them, rather
    than a driver's traceback midway (or, from librdkafka, a log line for every reconnect, tens a
    second). A plain connection: the schema may not exist yet (serve migrates), and only a driver
    can say what else is wrong."""
    if settings.profile != "services":
        return
    engines = (("Kafka", settings.kafka_bootstrap, "BLACKBOX_KAFKA_BOOTSTRAP", 9092, None),
               ("Couchbase", settings.couchbase_url, "BLACKBOX_COUCHBASE_URL", 11210, 11207),
               ("MySQL", settings.mysql_url, "BLACKBOX_MYSQL_URL", 3306, None))
    for engine, where, variable, default_port, tls_port in engines:
        if only is not None and engine not in only:
            continue
        host, port = _address(where, default_port, tls_port)
        try:
            socket.create_connection((host, port), timeout=3).close()
        except OSError as exc:
            raise UserError(f"{engine} does not answer at {host}:{port} ({exc.strerror or type(exc).__name__})",
                            f"start the engines with scripts/services start, or set {variable} to where yours "
                            "listens, or leave out --profile services to run on the embedded profile") from None


LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _open_host(keys: ApiKeys, host: str) -> tuple[str, str]:
    """Where to listen, and the line that says who may call: with no keys, this machine only."""
    if keys.configured:
        return host, (f"API keys: {len(keys.ingest)} ingest, {len(keys.server)} server, {len(keys.read)} read "
                      "(sent in the x-api-key header)")
    how = "set BLACKBOX_API_KEYS__INGEST/SERVER/READ (JSON lists of keys) to serve other machines"
    if host in LOOPBACK:
        return host, f"none, so only this machine may call; {how} with --host 0.0.0.0"
    return "127.0.0.1", f"none, so serving on 127.0.0.1 only, not {host}; {how}"


def _base_url(host: str, port: int) -> str:
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)  # a wildcard is reached at loopback too
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


@dataclass(frozen=True)
class Job:
    """What one worker process runs. Slot 0 of each kind also runs a periodic job: the API's the
    spill replay (the spill directory is the machine's where capture runs), the consumers' the
    retention purge."""

    kind: Literal["api", "consumers"]
    slot: int

    def __str__(self) -> str:
        return f"{'API' if self.kind == 'api' else 'consumers'} worker {self.slot}"


def jobs(role: Role, workers: int, profile: str) -> list[Job]:
    """On embedded the consumers are one process whatever `workers`: the SQLite log has no
    consumer groups, so two would each read every partition."""
    api = [Job("api", slot) for slot in range(workers)] if role != "consumers" else []
    consumers = 1 if profile == "embedded" else workers
    return api + ([Job("consumers", slot) for slot in range(consumers)] if role != "api" else [])


def _die_with(supervisor: int) -> None:
    """A worker whose supervisor died (SIGKILL, the OOM killer) dies too, as the one process of an
    older serve did: an orphan would hold the port and its partitions with no one to stop it.
    What it had in flight is not lost: uncommitted batches come again, unanswered requests were
    never acknowledged."""
    while os.getppid() == supervisor:
        time.sleep(WATCH_S)
    os.kill(os.getpid(), signal.SIGKILL)


def _work(job: Job, settings: Settings, sock: socket.socket | None, supervisor: int) -> None:
    """A worker process's body (run by multiprocessing's spawn: a fresh interpreter, no client
    state inherited from the supervisor)."""
    setproctitle(f"blackbox serve: {job}")
    # Ctrl-C reaches the whole process group: the supervisor answers it by sending SIGTERM
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stop, requested = threading.Event(), StopRequest()
    signal.signal(signal.SIGTERM, requested)
    # ignored under it: faulthandler.unregister at the stop puts back what was there before
    signal.signal(DUMP_STACKS, signal.SIG_IGN)
    faulthandler.register(DUMP_STACKS, all_threads=True)  # to stderr: the log
    # born with these blocked (Supervisor._start): a SIGTERM sent while it started comes now, to the
    # handler, and a SIGINT is dropped
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _HANDLED)
    if job.kind == "consumers":
        # before any thread starts: Linux keeps a niceness a thread, and new threads take their maker's
        os.nice(CONSUMER_NICENESS)
    threading.Thread(target=_die_with, args=(supervisor,), name="supervisor-watch", daemon=True).start()
    adapters = build(settings)
    install(adapters)
    threads: list[threading.Thread] = []
    try:
        if job.kind == "api":
            assert sock is not None
            threads += [spill_replayer(adapters, stop)] if job.slot == 0 else []
            for thread in threads:
                thread.start()
            host, port = sock.getsockname()[:2]
            # returns after SIGTERM, once in-flight requests are answered
            return_freed_buffers()  # process-wide: once, in the API worker
            gateway = Gateway(settings.api_keys, max_in_flight=settings.max_in_flight)
            _Server(http_config(gateway, host, port), requested).run(sockets=[sock])
        else:
            threads += ([purger(adapters, stop), webhook_sender(adapters, stop), season_teller(adapters, stop),
                         alert_teller(adapters, stop)] if job.slot == 0 else [])
            prefix = settings.kafka_topic_prefix
            threads += [Poller(adapters.log, name, topic, load_handler(name), stop, topic_prefix=prefix)
                        for name, topic in CONSUMERS.items()]
            for thread in threads:
                thread.start()
            while not requested.wait(WATCH_S):
                pass
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        install(None)
        adapters.close()
        faulthandler.unregister(DUMP_STACKS)
        _ignore_late_signals()  # the process exits next: a late SIGTERM must not cut its exit short
    if not all(thread.committed for thread in threads if isinstance(thread, Poller)):
        sys.exit(UNCOMMITTED)


def _death(exitcode: int) -> str:
    if exitcode == UNCOMMITTED:
        return "stopped with offsets not committed (the log says which)"
    if exitcode < 0:
        return f"was killed by {signal.Signals(-exitcode).name}"
    return f"exited with code {exitcode}"


class Supervisor:
    """Starts a worker process per job, starts again each one that dies, and on SIGINT/SIGTERM
    sends SIGTERM to all and waits for them (STOP_GRACE_S at most, then SIGKILL)."""

    def __init__(self, settings: Settings, sock: socket.socket | None, planned: list[Job]) -> None:
        self._settings = settings
        self._sock = sock
        self._spawn_context = multiprocessing.get_context("spawn")
        self._stop = StopRequest()
        self.running: dict[Job, tuple[SpawnProcess, float]] = {}
        self._planned = planned
        # the workers a stop did not see finish cleanly, and how each ended: what they had under way
        # may not be finished
        self.unfinished: dict[Job, str] = {}

    def _start(self, job: Job) -> SpawnProcess:
        # the listening socket to the API workers alone: a consumers worker would hold the port
        # while it finishes a batch at a stop, accepting nothing
        sock = self._sock if job.kind == "api" else None
        process = self._spawn_context.Process(target=_work, args=(job, self._settings, sock, os.getpid()),
                                              name=f"blackbox {job}")
        # born with SIGINT, SIGTERM and DUMP_STACKS blocked (a mask outlives fork and exec), which
        # _work takes once its handlers are set: one that came while its interpreter started (a
        # Ctrl-C reaches the whole process group) would kill it, as if cut mid-batch. The resource
        # tracker first: the first start makes it, and unblocks them in this thread as it does
        resource_tracker.ensure_running()
        unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, _HANDLED)
        try:
            process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
        self.running[job] = (process, time.monotonic())
        return process

    def restart_in(self, job: Job, exitcode: int) -> float:
        """How long after its death a worker is started again: at once, but a consumers worker
        killed (by a signal: it left no group) on services once its groups have dropped it. Joining
        while they still count it, it would start a rebalance that waits for the dead member's
        session to time out, and librdkafka's eager rebalance stops every member meanwhile; joining
        after, the other members have taken over its partitions by then."""
        killed = exitcode < 0 and job.kind == "consumers" and self._settings.profile == "services"
        return DROPPED_S if killed else 0.0

    def pids(self, kind: str) -> str:
        return ", ".join(str(process.pid) for job, (process, _) in self.running.items() if job.kind == kind)

    def run(self, started: Callable[[Supervisor], None]) -> None:
        """Starts the workers, calls `started`, and supervises them until SIGINT/SIGTERM; raises
        WorkerFailed once a worker keeps dying as soon as it starts."""
        # kept while serve finishes: a second signal finds it stopping, and does not cut that short
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._stop)
        signal.signal(DUMP_STACKS, self._dump_stacks)
        quick_deaths: Counter[Job] = Counter()
        # the dead workers: when each is started again, and the pid it had
        due: dict[Job, tuple[float, int | None]] = {}
        try:
            for job in self._planned:
                self._start(job)
            started(self)
            while not self._stop.wait(WATCH_S):
                for job, (process, since) in list(self.running.items()):
                    if process.exitcode is None or job in due:
                        continue
                    death = _death(process.exitcode)
                    quick_deaths[job] = quick_deaths[job] + 1 if time.monotonic() - since < QUICK_DEATH_S else 0
                    if quick_deaths[job] >= MAX_QUICK_DEATHS:
                        raise WorkerFailed(f"{job} died {MAX_QUICK_DEATHS} times within {QUICK_DEATH_S:g} s of "
                                           f"starting (the last {death}), so serve stopped",
                                           "the lines above say why")
                    wait_s = self.restart_in(job, process.exitcode)
                    due[job] = (time.monotonic() + wait_s, process.pid)
                    later = f" in {wait_s:g} s, once its consumer groups have dropped it" if wait_s else ""
                    print(f"blackbox: {job} (pid {process.pid}) {death}; starting it again{later}",
                          file=sys.stderr, flush=True)
                for job in [job for job, (at, _) in due.items() if at <= time.monotonic()]:
                    _, dead = due.pop(job)
                    again = self._start(job)
                    print(f"blackbox: started {job} again as pid {again.pid}, in place of pid {dead}",
                          file=sys.stderr, flush=True)
        finally:
            self.stop_all()

    def _dump_stacks(self, *_: object) -> None:
        for process, _started in self.running.values():
            if process.exitcode is None and process.pid is not None:
                with suppress(ProcessLookupError):
                    os.kill(process.pid, DUMP_STACKS)

    def stop_all(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM to every worker; SIGKILL to those still running `grace_s` later. The listening
        socket is let go at once: the API workers close theirs as they stop accepting, and the port
        is free for a serve started again while a consumers worker still finishes its batch."""
        for process, _ in self.running.values():
            if process.exitcode is None:
                process.terminate()
        if self._sock is not None:
            self._sock.close()
        deadline = time.monotonic() + grace_s
        for job, (process, _) in self.running.items():
            process.join(max(0.0, deadline - time.monotonic()))
            if process.exitcode is None:
                print(f"blackbox: {job} (pid {process.pid}) had not stopped {grace_s:g} s after SIGTERM; killed it",
                      file=sys.stderr, flush=True)
                process.kill()
                process.join()
                self.unfinished[job] = f"had not stopped {grace_s:g} s after SIGTERM, so was killed"
            elif process.exitcode != 0:
                self.unfinished[job] = _death(process.exitcode)


def serve(settings: Settings, host: str, port: int, role: Role = "all", workers: int | None = None) -> None:
    if settings.profile == "embedded" and role != "all":
        raise UserError(f"--role {role} needs the services profile: on embedded one serve runs the API and the "
                        "consumers together (the SQLite log has no consumer groups)",
                        "leave out --role, or pass --profile services")
    planned = jobs(role, workers or default_workers(), settings.profile)
    # until the supervisor answers it, once the engines are checked and migrated: it would kill serve
    signal.signal(DUMP_STACKS, signal.SIG_IGN)
    keys = settings.api_keys
    if shared := keys.shared():
        first, second = (f"BLACKBOX_API_KEYS__{role.value.upper()}" for role in shared[0])
        raise UserError(f"a key is listed under both {first} and {second}, and would get one role only",
                        "give each role keys of its own")  # not the key: it is a secret
    host, keys_line = _open_host(keys, host)
    with ExitStack() as running:
        try:
            sock = running.enter_context(listen(host, port)) if role != "consumers" else None
        except PortInUse:
            # the port and the data directory both taken: most likely a serve already running, where
            # the port's hint alone only leads to the data directory's
            if settings.profile == "embedded" and _data_dir_held(settings.data_dir):
                raise UserError(f"Blackbox is already running: port {port} on {host} is in use and another "
                                f"serve holds {settings.data_dir}",
                                f"use it at {_base_url(host, port)}/, or stop it first; a second one needs "
                                "another --port and --data-dir (with make: make serve PORT=… DATA_DIR=…)") from None
            raise
        if settings.profile == "embedded":
            running.callback(os.close, lock_data_dir(settings.data_dir))
        # metrics are for CloudWatch; here the log line of an alert is enough (set it to false to see them)
        os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
        check_engines(settings)
        migrate(settings)  # once, before any worker: as the AWS deployment's custom resource does

        def announce(supervisor: Supervisor) -> None:
            processes = f"  processes  supervisor {os.getpid()}"
            processes += f"; API {supervisor.pids('api')}" if role != "consumers" else ""
            processes += f"; consumers {supervisor.pids('consumers')}" if role != "api" else ""
            if sock is None:
                print(f"Blackbox consumers running ({settings.profile}, data in {settings.data_dir}); "
                      f"Ctrl-C stops them\n{processes}", flush=True)
                return
            url = _base_url(host, port)
            lan = f"  LAN        http://<this machine's address>:{port}\n" if host in ("0.0.0.0", "::") else ""
            print(f"Blackbox serving on {url} ({settings.profile}, data in {settings.data_dir}); Ctrl-C stops it\n"
                  f"  API        {url}/v1/…   (try: curl {url}/v1/health)\n"
                  f"  dashboard  {url}/\n{lan}"
                  f"  keys       {keys_line}\n{processes}", flush=True)

        supervisor = Supervisor(settings, sock, planned)
        try:
            supervisor.run(announce)
        finally:
            _ignore_late_signals()
    print(stopped(role, supervisor.unfinished), flush=True)


def stopped(role: Role, unfinished: Mapping[Job, str]) -> str:
    """Serve's last line: whether every worker finished what it had under way."""
    if unfinished:  # nothing acknowledged is lost: a batch not committed is consumed again
        return (f"Blackbox stopped; {', '.join(f'{job} {how}' for job, how in unfinished.items())}: a consumers "
                "worker's batch under way is consumed again at the next start, an API worker's requests under way "
                "were cut (their clients send them again)")
    return "Blackbox stopped" + ("" if role == "api" else "; every consumed batch is committed")


def _ignore_late_signals() -> None:
    """Once a process (serve, or one of its workers) has stopped, a late SIGINT/SIGTERM has nothing
    left to stop (nor DUMP_STACKS anything to show); left to the handler, it would kill the process
    at exit, where Python puts back each signal's default action. Blocked first, in this thread; one
    delivered to another thread (the mask is a thread's) during the change trips Python's handler,
    which then finds it ignored and reports that through sys.unraisablehook, a traceback in the log:
    a call of Python code within the change makes Python run that report here, where it is dropped."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _HANDLED)
    report = sys.unraisablehook

    def drop_ignored_signals(unraisable: Any) -> None:
        if not (isinstance(unraisable.exc_value, OSError) and "race condition" in str(unraisable.exc_value)):
            report(unraisable)

    sys.unraisablehook = drop_ignored_signals
    try:
        for sig in _HANDLED:
            signal.signal(sig, signal.SIG_IGN)
        signal.getsignal(signal.SIGTERM)
    finally:
        sys.unraisablehook = report
