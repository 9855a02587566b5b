"""`blackbox serve`: the API behind the local gateway, and every consumer behind a poller, in one
process until SIGINT/SIGTERM; then the in-flight batches finish and are committed."""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import socket
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import uvicorn

from adapters.factory import Settings, build, install, migrate
from core.access import ApiKeys
from local_runtime.errors import UserError
from local_runtime.functions import CONSUMERS, load_handler
from local_runtime.gateway import Gateway, http_config
from local_runtime.periodic import purger, spill_replayer
from local_runtime.poller import Poller


class DataDirInUse(UserError):
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


def lock_data_dir(data_dir: Path, fix: str = "stop that serve first, or pass another --data-dir") -> int:
    """One serve per data directory: two would both consume the same topics (and `blackbox invoke`
    takes it too, unless told to run beside a live serve)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_dir / "serve.lock", os.O_CREAT | os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise DataDirInUse(f"another blackbox serve is using {data_dir}", fix) from None
    return fd


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
            problem, free = f"port {port} on {host} is in use", _free_port_near(host, port)
        elif exc.errno == errno.EACCES:
            problem, free = f"port {port} needs root, as every port below 1024", _free_port_near(host, 8079)
        else:
            raise UserError(f"cannot listen on {host}:{port} ({exc.strerror or exc})",
                            "pass --host 127.0.0.1 (this machine only) or --host 0.0.0.0 (every interface)") from None
        raise UserError(problem, f"try --port {free} (with make: make serve PORT={free})") from None

def _address(where: str, default_port: int) -> tuple[str, int]:
    """The first host and port of a bootstrap list or an engine's URL (credentials left out)."""
    first = urlsplit(where if "://" in where else f"//{where}").netloc.rpartition("@")[2].split(",")[0]
    parsed = urlsplit(f"//{first}")
    return parsed.hostname or "127.0.0.1", parsed.port or default_port


def check_engines(settings: Settings) -> None:
    """On the services profile, each engine listens before a command relies on it; else one line
    says which does not and how to start them, rather than a driver's traceback midway (or, from
    librdkafka, a log line for every reconnect, tens a second). A plain connection: the schema
    may not exist yet (serve migrates), and only a driver can say what else is wrong."""
    if settings.profile != "services":
        return
    engines = (("Kafka", settings.kafka_bootstrap, 9092), ("Couchbase", settings.couchbase_url, 11210),
               ("MySQL", settings.mysql_url, 3306))
    for engine, where, default_port in engines:
        host, port = _address(where, default_port)
        try:
            socket.create_connection((host, port), timeout=3).close()
        except OSError as exc:
            raise UserError(f"{engine} does not answer at {host}:{port} ({exc.strerror or type(exc).__name__})",
                            "start the engines with scripts/services start, or leave out --profile services "
                            "to run on the embedded profile") from None


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


def serve(settings: Settings, host: str, port: int) -> None:
    keys = settings.api_keys
    host, keys_line = _open_host(keys, host)
    with ExitStack() as running:
        sock = running.enter_context(listen(host, port))
        running.callback(os.close, lock_data_dir(settings.data_dir))
        # metrics are for CloudWatch; here the log line of an alert is enough (set it to false to see them)
        os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
        check_engines(settings)
        adapters = build(settings)
        running.callback(adapters.close)
        migrate(settings)  # as the AWS deployment's custom resource does before the functions run
        install(adapters)
        running.callback(install, None)
        stop = threading.Event()
        workers: list[threading.Thread] = [spill_replayer(adapters, stop), purger(adapters, stop)]
        prefix = adapters.settings.kafka_topic_prefix
        workers += [Poller(adapters.log, name, topic, load_handler(name), stop, topic_prefix=prefix)
                    for name, topic in CONSUMERS.items()]
        for worker in workers:
            worker.start()

        @running.callback
        def _drain() -> None:
            stop.set()
            for worker in workers:
                worker.join()

        url = _base_url(host, port)
        lan = f"  LAN        http://<this machine's address>:{port}\n" if host in ("0.0.0.0", "::") else ""
        print(f"Blackbox serving on {url} ({settings.profile}, data in {settings.data_dir}); Ctrl-C stops it\n"
              f"  API        {url}/v1   (try: curl {url}/v1/health)\n"
              f"  dashboard  {url}/\n{lan}"
              f"  keys       {keys_line}", flush=True)
        # returns after SIGINT/SIGTERM, once in-flight requests are answered
        _Server(http_config(Gateway(keys), host, port)).run(sockets=[sock])
    print("Blackbox stopped; every consumed batch is committed", flush=True)
