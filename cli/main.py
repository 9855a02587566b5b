"""The `blackbox` command line (docs/cli.md). Every command's errors pass one boundary, `main`: a
UserError is one line with its fix, anything else one line pointing at --debug."""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from contextlib import ExitStack, contextmanager, redirect_stdout
from pathlib import Path
from typing import Any, NoReturn, TextIO, cast

from aws_lambda_powertools.utilities.parser.models import KafkaMskEventModel
from pydantic import ValidationError
from pydantic_settings import SettingsError
from rich.console import Console
from rich.status import Status

from adapters.factory import LOG_FILE, Adapters, build, install, migrate
from adapters.settings import SERVICES_ENV_FILE, Settings, unknown_variables
from lambdas.functions import API_ROUTES, CONSUMERS, FUNCTIONS, load_handler
from local_runtime.arguments import KEY, READ_KEY, SERVER_KEY, bounded, data_dir, integer, key_option
from local_runtime.context import LocalContext
from local_runtime.poller import READERS
from local_runtime.server import ROLES, check_engines, default_workers, lock_data_dir, serve
from local_runtime.smoke import http_url
from local_runtime.smoke import register as register_smoke
from pipeline.topics import DEADLETTER, IDLE_TIMEOUT_S, JOIN_TIMEOUT_S, replay_dead_letters, replay_spilled
from ports.errors import UserError
from ports.telemetry import logger
from ports.timeutil import now_ms
from sessions.model import MAX_BATCH

EVENTS = Path(__file__).resolve().parents[1] / "events"


def _api_event_fault(event: dict[str, Any]) -> str | None:
    """What is wrong with an API Gateway proxy event: only the keys the handlers read first. Not
    Powertools' model, which requires request context fields the local server does not send."""
    missing = [key for key in ("httpMethod", "path") if not isinstance(event.get(key), str)]
    return f"it has no {', '.join(missing)}" if missing else None


def _msk_event_fault(event: dict[str, Any]) -> str | None:
    """What is wrong with an MSK event, down to a record's field, by Powertools' model of the event
    Lambda delivers (a record without `topic` was a KeyError deep in the handler)."""
    try:
        KafkaMskEventModel.model_validate(event)
    except ValidationError as exc:
        errors = [(".".join(map(str, error["loc"])), error) for error in exc.errors()]
        if missing := [where for where, error in errors if error["type"] == "missing"]:
            more = f" and {len(missing) - 4} more" if len(missing) > 4 else ""
            return f"it has no {', '.join(missing[:4])}{more}"
        where, first = errors[0]
        return f"{where}: {first['msg']}"
    return None


# what to call the event each kind of handler takes, and what is wrong with one (None: nothing)
_SHAPES: dict[str, tuple[str, Callable[[dict[str, Any]], str | None]]] = {
    **{route.function: ("an API Gateway proxy event", _api_event_fault) for route in API_ROUTES},
    **{function: ("an MSK event", _msk_event_fault) for function in CONSUMERS},
}


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {"data_dir": args.data_dir} if args.data_dir is not None else {}
    if args.profile is not None:
        overrides["profile"] = args.profile
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        # the variable: the names before an entry's position (what follows names the entry's type)
        name = "BLACKBOX_" + "__".join(str(part).upper() for part in itertools.takewhile(
            lambda part: isinstance(part, str), first["loc"]))
        # not the value: it may be a key
        raise UserError(f"{name}: {first['msg']}", _fix_where(name)) from None
    except SettingsError as exc:
        field = str(exc).partition('field "')[2].partition('"')[0]
        raise UserError(f"{exc} (lists and objects are JSON, e.g. BLACKBOX_API_KEYS__READ='[\"a-key\"]')",
                        _fix_where(f"BLACKBOX_{field.upper()}")) from None
    in_file = set(_env_file_names()) - set(os.environ)
    for name, near in unknown_variables({*os.environ, *in_file}).items():
        print(f"blackbox: {name}" + (f" (in {SERVICES_ENV_FILE})" if name in in_file else "")
              + " is no setting, and is ignored" + (f" ({near}?)" if near else ""), file=sys.stderr)
    if settings.profile == "aws":  # the deployment's: its engines are reached from within the VPC
        raise UserError("BLACKBOX_PROFILE=aws is the Lambda functions' profile; the commands run embedded or "
                        "services", "pass --profile embedded or services (a deployment is reached by its URL: "
                        "blackbox smoke or load --url)")
    return settings


def _check_data_dir(settings: Settings) -> Settings:
    """The settings, if their data directory is one or can be made (its nearest existing path a
    directory): else one line, not the error of the first store that makes its files there."""
    for path in (settings.data_dir, *settings.data_dir.parents):
        if path.is_dir():
            return settings
        if path.exists() or path.is_symlink():  # a file, or a link to nothing
            break
    raise UserError(f"{settings.data_dir} is not a directory and cannot be made one",
                    "pass --data-dir a directory (made if missing)")


def _serves_data(args: argparse.Namespace) -> Settings:
    """The settings of a command on a serve's data. On embedded, where all of it is in the data
    directory, one that holds no log is refused: a mistyped --data-dir would be made, and found empty."""
    settings = _check_data_dir(_settings(args))
    if settings.profile == "embedded" and not (settings.data_dir / LOG_FILE).is_file():
        raise UserError(f"no Blackbox data in {settings.data_dir}: it holds no log",
                        "pass the --data-dir of the serve to look at (its default: ./blackbox-data)")
    return settings


def _fix_where(name: str) -> str:
    """Where to fix the setting `name`: where it is set, the environment or the services env file
    (read from the working directory whatever the profile, when scripts/services has written it)."""

    def sets(variable: str) -> bool:  # a nested setting is also set by its parent's JSON, and sets it
        variable = variable.upper()
        return variable == name or name.startswith(f"{variable}__") or variable.startswith(f"{name}__")

    places = ["the environment"] if any(sets(variable) for variable in os.environ) else []
    if any(sets(variable) for variable in _env_file_names()):
        places.append(SERVICES_ENV_FILE)
    return "fix it in " + " or in ".join(places or ["the environment"])


def _env_file_names() -> list[str]:
    """The names the services env file sets, when there is one (the settings read it from the
    working directory whatever the profile)."""
    env_file = Path(SERVICES_ENV_FILE)
    if not env_file.is_file():
        return []
    return [line.partition("=")[0].strip().removeprefix("export ").strip()
            for line in env_file.read_text().splitlines() if "=" in line and not line.lstrip().startswith("#")]


@contextmanager
def _adapters(settings: Settings, engines: Collection[str] | None = None) -> Iterator[Adapters]:
    """The ports for one command, closed after it; on the services profile, once the engines it
    uses (all, unless named) answer."""
    check_engines(_check_data_dir(settings), engines)
    adapters = build(settings)
    try:
        yield adapters
    finally:
        adapters.close()


def _serve(args: argparse.Namespace) -> int:
    serve(_check_data_dir(_settings(args)), args.host, args.port, args.role, args.workers)
    return 0


# four a CPU: more only share the cores, and each is a process with its memory
MAX_WORKERS = 4 * default_workers()
_workers = bounded(integer, 1, MAX_WORKERS, f"a number of processes (1 to {MAX_WORKERS}, four a CPU here)")
# here, not bind()'s OverflowError; 0 is left out too: serve would announce a URL with port 0
_port = bounded(integer, 1, 65535, "a port (1-65535)")


def _sample(function: str) -> str:
    samples = sorted(EVENTS.glob(f"{function}*.json"))
    return os.path.relpath(samples[0]) if samples else os.path.relpath(EVENTS) + "/"


def _event(path: Path, function: str) -> dict[str, Any]:
    """The event file's JSON, of the shape the function's handler takes."""
    sample = _sample(function)
    try:
        event = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"no event file {path}", f"pass a sample event, e.g. --event {sample}") from None
    except IsADirectoryError:
        raise UserError(f"{path} is a directory", f"pass an event file, e.g. --event {sample}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path} is not UTF-8, which JSON is", f"start from --event {sample}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})",
                        f"fix it, or start from {sample}") from None
    shape, fault = _SHAPES.get(function, ("a JSON object", lambda _event: None))
    problem = f"{path} is not {shape}, which {function} takes"
    if not isinstance(event, dict):
        raise UserError(problem, f"try --event {sample}")
    if (wrong := fault(event)) is not None:
        raise UserError(f"{problem} ({wrong})", f"try --event {sample}")
    return event


@contextmanager
def _logging_to(stream: TextIO) -> Iterator[None]:
    """The handlers' log lines to `stream` meanwhile (the logger's handler holds the stdout of when it
    was made, which redirect_stdout does not change)."""
    handler = cast(logging.StreamHandler[TextIO], logger.registered_handler)
    before = handler.setStream(stream)
    try:
        yield
    finally:
        if before is not None:
            handler.setStream(before)


def _invoke(args: argparse.Namespace) -> int:
    """On a scratch data directory unless told otherwise: a sample event run on a live deployment's
    data commits the sample's offsets into its offset table, and its consumers then skip real events."""
    settings = _settings(args)
    event = _event(args.event, args.function)
    with ExitStack() as cleanup:
        if not args.live:
            if settings.profile != "embedded":
                raise UserError("invoke on the services profile writes to the engines a serve may be using "
                                "(offsets, reports, counters)", "pass --live to do so")
            if args.data_dir is None:
                scratch = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="blackbox-invoke-"))
                settings = settings.model_copy(update={"data_dir": Path(scratch)})
            else:
                cleanup.callback(os.close, lock_data_dir(_check_data_dir(settings).data_dir,
                                                         "pass --live to invoke beside it"))
        install(cleanup.enter_context(_adapters(settings)))
        cleanup.callback(install, None)
        # what the handler writes for Lambda's log (its metrics, its log lines) beside the answer, not in it
        with redirect_stdout(sys.stderr), _logging_to(sys.stderr):
            result = load_handler(args.function)(event, LocalContext(function_name=args.function))
    print(json.dumps(result, indent=2))
    return 0


# the one engine migrate uses: it runs before a deploy, or while the others are down
MIGRATE_ENGINES = frozenset({"MySQL"})


def _migrate(args: argparse.Namespace) -> int:
    settings = _serves_data(args)
    with _adapters(settings, MIGRATE_ENGINES), _logging_to(sys.stderr):
        applied = migrate(settings)
    print(f"applied {len(applied)} migration(s)" + "".join(f"\n  {name}" for name in applied))
    return 0


# on a wait that shows nothing by itself: how often a line says what is left when there is no
# terminal to redraw a spinner on (a log, a pipe, CI), where rich's status draws nothing
COUNTDOWN_EVERY_S = 3.0


class _Countdown:
    """The seconds left of the wait last started, while the block runs: on the spinner in a
    terminal, else as a line every COUNTDOWN_EVERY_S."""

    def __init__(self, console: Console, status: Status, what: str) -> None:
        self._console, self._status, self._what = console, status, what
        self._deadline = time.monotonic()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, daemon=True)

    def started(self, seconds: float) -> None:
        """A wait of at most `seconds` begins now."""
        self._deadline = time.monotonic() + seconds

    def _tick(self) -> None:
        terminal = self._console.is_terminal
        while not self._stop.wait(1.0 if terminal else COUNTDOWN_EVERY_S):
            left = math.ceil(self._deadline - time.monotonic())
            if left <= 0:
                continue
            text = f"{self._what}: waiting at most {left} s more"
            if terminal:
                self._status.update(f"{text} …")
            else:
                self._console.print(text, highlight=False, soft_wrap=True)

    def __enter__(self) -> _Countdown:
        self._ticker.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._ticker.join()


def _replay(args: argparse.Namespace) -> int:
    settings = _serves_data(args)
    console = Console(stderr=True)
    with (_adapters(settings) as adapters, _logging_to(sys.stderr),
          console.status("publishing spilled events …") as status):
        print(f"replayed {replay_spilled(adapters.log, adapters.spill)} spilled event(s)")
        if args.dead_letters:
            ever = sum(adapters.log.end_offsets(DEADLETTER).values())
            what = f"replaying dead letters (of {ever} ever dead-lettered, those not replayed yet)"
            by_topic = Counter[str]()
            if ever and settings.profile == "embedded":
                status.update(f"{what} …")
                # the embedded log has no group to join, and every record below the end offsets is
                # there at the first look: the waits that give Kafka time would only be silence
                by_topic = replay_dead_letters(adapters.log, poll_timeout_s=0, join_timeout_s=0)
            elif ever:
                # a line of its own: the spinner draws nothing without a terminal
                console.print(f"{what}: waiting up to {JOIN_TIMEOUT_S:.0f} s for Kafka to assign the replay group "
                              "its partitions, then until it read those there were "
                              f"(or {IDLE_TIMEOUT_S:.0f} s pass with none)", highlight=False, soft_wrap=True)
                with _Countdown(console, status, "replaying dead letters") as countdown:
                    by_topic = replay_dead_letters(adapters.log, poll_timeout_s=IDLE_TIMEOUT_S,
                                                   waiting=countdown.started)
            print(f"replayed {sum(by_topic.values())} dead letter(s)"
                  + "".join(f"\n  {topic}: {n}" for topic, n in sorted(by_topic.items())))
    return 0


def _purge(args: argparse.Namespace) -> int:
    from retention.purge import purge

    with _adapters(_serves_data(args)) as adapters, _logging_to(sys.stderr):
        purged = purge(adapters, now_ms(), readers=READERS)
    print("purged what is past retention:" + "".join(f"\n  {name}: {n}" for name, n in purged.__dict__.items()))
    return 0


# what lag reads: the log alone
LAG_ENGINES = frozenset({"Kafka"})


def _lag(args: argparse.Namespace) -> int:
    from local_runtime.lag import lags

    settings = _serves_data(args)
    with _adapters(settings, LAG_ENGINES) as adapters:
        found, now = lags(adapters.log), now_ms()
        dead_letters = sum(adapters.log.end_offsets(DEADLETTER).values())
    # a serve makes its consumers' topics as it starts: with none, these settings name no serve's
    prefix = settings.kafka_topic_prefix if settings.profile == "services" else ""
    if settings.profile == "services" and not any(lag.partitions for lag in found):
        raise UserError(f"Kafka at {settings.kafka_bootstrap} has no topic of a serve's consumers under the prefix "
                        f"{prefix!r} (BLACKBOX_KAFKA_TOPIC_PREFIX)",
                        "give BLACKBOX_KAFKA_BOOTSTRAP and BLACKBOX_KAFKA_TOPIC_PREFIX as the serve looked at has them")
    waited = {lag.function: None if lag.oldest_ms is None else max(0, now - lag.oldest_ms) / 1000 for lag in found}
    if args.json:
        print(json.dumps({"consumers": [{"function": lag.function, "topic": prefix + lag.topic, "behind": lag.behind,
                                         "oldestWaitingS": waited[lag.function]} for lag in found],
                          "deadLetters": dead_letters}))
        return 0
    width, topics = max(len(lag.function) for lag in found), max(len(prefix + lag.topic) for lag in found)
    print(f"{'consumer':<{width}}  {'topic':<{topics}}  {'behind':>9}  oldest waiting")
    for lag in found:
        wait = waited[lag.function]
        print(f"{lag.function:<{width}}  {prefix + lag.topic:<{topics}}  {lag.behind:>9,}  "
              f"{'-' if wait is None else f'{wait:,.1f} s'}")
    print(f"dead letters: {dead_letters:,} set aside ever (blackbox replay --dead-letters publishes them again)")
    return 0


def _openapi(args: argparse.Namespace) -> int:
    from lambdas.contract import render

    text = render()
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        args.output.write_text(text)
    except OSError as exc:
        raise UserError(f"{args.output} cannot be written ({exc.strerror})",
                        "pass --output a file in a directory this user can write") from None
    print(f"wrote {args.output}")
    return 0


_KINDS = ("crashes", "sessions", "scores")


def _mix(text: str) -> tuple[float, float, float]:
    """--mix crashes=0.2,sessions=0.6,scores=0.2 → the shares in that order."""
    try:
        shares = {kind: float(share) for kind, share in (part.split("=") for part in text.split(","))}
    except ValueError:
        shares = {}
    if not shares or not set(shares) <= set(_KINDS) or not all(0 <= share < math.inf for share in shares.values()) \
            or not sum(shares.values()) > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not shares of {', '.join(_KINDS)} (0 or more, not all 0), "
                                         "e.g. crashes=0.2,sessions=0.6,scores=0.2")
    return shares.get("crashes", 0.0), shares.get("sessions", 0.0), shares.get("scores", 0.0)


# load's exit when a kind of request was only refused (the key): not 2, which says something was lost
LOAD_REFUSED = 3


# the requests a run may plan: it plans them all before the first and keeps each one's outcome to
# the end, some 600 bytes each (0.6 GB); a rate and a duration each within its bounds could still
# ask billions
MAX_REQUESTS = 1_000_000


def _check_writable(path: Path, option: str) -> None:
    """That `path` can be written, before a run whose results go there (a file made to tell is removed)."""
    made = not path.exists()
    try:
        path.open("a").close()
    except OSError as exc:
        raise UserError(f"{option} {path} cannot be written ({exc.strerror})",
                        "pass a file in a directory this user can write") from None
    if made:
        path.unlink()


def _check_load(args: argparse.Namespace) -> None:
    """What load cannot do, said before it sends (not after a run of hours)."""
    import psutil  # the load extra's, which only this command needs

    from loadgen.profiles import PROFILES

    planned = args.rate * args.duration * PROFILES[args.profile].mean
    if not 1 <= planned <= MAX_REQUESTS:
        raise UserError(f"--rate {args.rate:g} for --duration {args.duration:g} s ({args.profile}) is some "
                        f"{planned:,.0f} requests; a run sends 1 to {MAX_REQUESTS:,}",
                        "raise or lower --rate or --duration")
    if args.watch_pid is not None and not psutil.pid_exists(args.watch_pid):
        raise UserError(f"--watch-pid {args.watch_pid}: no such process", "pass the pid of the serve to watch")
    if args.json is not None:
        _check_writable(args.json, "--json")


def _load(args: argparse.Namespace) -> int:
    from loadgen.run import LoadConfig, run  # heavy imports only for this command

    _check_load(args)
    config = LoadConfig(
        url=args.url, profile=args.profile, rate=args.rate, duration_s=args.duration, crash_kb=args.crash_kb,
        mix=args.mix, batch=args.batch, api_key=args.api_key, read_key=args.read_key, seed=args.seed,
        watch_pid=args.watch_pid,
    )
    report = run(config)
    print(report.as_text())
    if args.json is not None:
        args.json.write_text(json.dumps(report.as_json(), indent=2))
    refused = report.refused()
    for kind, statuses in refused.items():
        key = "a server key (only one may post scores)" if kind == "scores" else \
            "an ingest or server key not limited to skus (load posts skus of its own)"
        print(f"blackbox: every {kind} request was refused ({', '.join(f'{s} x{n}' for s, n in statuses.items())}), "
              f"so none was measured; pass --api-key with {key}", file=sys.stderr)
    if report.verification.lost:
        return 2
    return LOAD_REFUSED if refused else 0


def _bench(args: argparse.Namespace) -> int:
    from benchmarks import report  # heavy imports only for this command

    if args.soak is not None:
        report.soak_only(args.soak, args.output)
        return 0
    report.run(args.quick, args.output)
    return 0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line, as every other error, instead of the usage block."""
        self.exit(2, f"{self.prog}: {message}; see {self.prog} --help\n")


DEBUG_HELP = "on an error, show the traceback"


def _measuring_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """`load` and `bench`."""
    load_cmd = command("load", "open-loop load against a running serve (or deployment); "
                       "checks at the end that nothing accepted was lost (exit 2 if it was; 3 if every "
                       "request of a kind was refused, e.g. scores without a server key)")
    load_cmd.add_argument("--url", type=http_url, default="http://127.0.0.1:8080",
                          help="the serve or deployment, with its http:// or https:// (default http://127.0.0.1:8080)")
    load_cmd.add_argument("--profile", choices=["steady", "spike", "launch"], default="steady",
                          help="steady; spike: x10 in the middle 40%% of the run; launch: ramp to x5, hold")
    load_cmd.add_argument("--rate", type=bounded(float, 0.001, 100_000.0, "a rate (requests a second, 0.001 to "
                                                 "100,000)"), default=50, help="base requests/s (default 50)")
    load_cmd.add_argument("--duration", type=bounded(float, 0.001, 10_800.0, "a duration (seconds, 0.001 to "
                                                     "10,800)"), default=30, help="seconds (default 30)")
    load_cmd.add_argument("--crash-kb", type=bounded(integer, 1, 1024, "a size (KB, 1 to 1,024)"), default=100,
                          help="average crash report size in KB (default 100): bimodal, small 0.3-5 KB and "
                               "large 10-512 KB")
    load_cmd.add_argument("--mix", type=_mix, default="crashes=0.2,sessions=0.6,scores=0.2",
                          help="request shares (default crashes=0.2,sessions=0.6,scores=0.2)")
    load_cmd.add_argument("--batch", type=bounded(integer, 1, MAX_BATCH, f"a batch (1 to {MAX_BATCH})"), default=10,
                          help="session events and scores per request (default 10)")
    # its scores need a server key: an ingest key gets 403 on every one
    key_option(load_cmd, "--api-key", "a key that may post (a server key for scores)", SERVER_KEY, KEY)
    key_option(load_cmd, "--read-key", "a key that may read, for the final check", READ_KEY)
    load_cmd.add_argument("--seed", type=int, default=1, help="the run's random choices (default 1)")
    load_cmd.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    load_cmd.add_argument("--watch-pid", type=bounded(integer, 1, 2**31 - 1, "a process id"), default=None,
                          metavar="PID",
                          help="sample the memory of this server process and its workers through the run")
    load_cmd.set_defaults(run=_load)

    bench_cmd = command("bench", "measure, side by side, and write BENCHMARKS.md (needs scripts/services start)")
    bench_cmd.add_argument("--quick", action="store_true", help="smaller sizes and shorter runs")
    bench_cmd.add_argument("--output", type=Path, default=Path("BENCHMARKS.md"),
                           help="the report to write (default BENCHMARKS.md); the plots go under benchmarks/ "
                                "beside it")
    bench_cmd.add_argument("--soak", type=bounded(float, 0.1, 1440.0, "minutes (0.1 to 1,440)"), metavar="MINUTES",
                           default=None,
                           help="instead: the soak alone, this long at the paper's baseline mix on services, "
                                "then a minute past saturation; replaces its block of BENCHMARKS.md")
    bench_cmd.set_defaults(run=_bench)


def parser() -> argparse.ArgumentParser:
    root = _Parser(prog="blackbox", description="Crash reporting and leaderboards for online games")
    root.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    commands = root.add_subparsers(dest="command", required=True)
    # also after the command; suppressed when absent, so the root's value stands
    debug = _Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, parents=[debug])
        sub.set_defaults(command_parser=sub)  # for main to point an unknown option at this command's help
        return sub

    def storage_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", type=data_dir, default=None,
                       help="the serve's data directory (default ./blackbox-data): embedded's files, and on "
                            "services its spill (an API machine's, for replay)")
        p.add_argument("--profile", choices=["embedded", "services"], default=None,
                       help="embedded (SQLite, the default) or services (Kafka, MySQL, Couchbase)")

    serve_cmd = command("serve", "run the API, the consumers and the periodic jobs until stopped")
    serve_cmd.add_argument("--host", default="127.0.0.1",
                           help="the address to listen on (default 127.0.0.1; 0.0.0.0 for the LAN, with keys: README)")
    serve_cmd.add_argument("--port", type=_port, default=8080, help="the port (default 8080)")
    serve_cmd.add_argument("--role", choices=ROLES, default="all",
                           help="all (the default): the API and the consumers; api: the HTTP API alone; consumers: "
                           "the consumers and the purge alone. api and consumers need --profile services, where "
                           "any number of serves, on any number of machines, share the engines as one system "
                           "(docs/scale-out.md)")
    serve_cmd.add_argument("--workers", type=_workers, default=None, metavar="N",
                           help=f"processes per role (default: one per CPU, {default_workers()} here); API workers "
                           "share the port. On embedded the consumers stay one process whatever N (the SQLite log "
                           "has no consumer groups), and the N API workers append to the log's file in turn "
                           "(SQLite's lock): they add CPU for requests, not write throughput")
    storage_options(serve_cmd)
    serve_cmd.set_defaults(run=_serve)

    invoke_cmd = command("invoke", "run one Lambda handler on one sample event")
    invoke_cmd.add_argument("function", choices=sorted(FUNCTIONS))
    invoke_cmd.add_argument("--event", type=Path, required=True,
                            help="a JSON event file, e.g. events/capture-crash.json")
    storage_options(invoke_cmd)
    invoke_cmd.add_argument("--live", action="store_true",
                            help="run on the data directory (given or default) even while a serve uses it, or on "
                            "the services engines: the sample's records and offsets become that deployment's. "
                            "Without it, invoke runs on a scratch directory unless --data-dir is given")
    invoke_cmd.set_defaults(run=_invoke)

    migrate_cmd = command("migrate", "apply pending schema migrations: MySQL's, or an embedded data directory's")
    storage_options(migrate_cmd)
    migrate_cmd.set_defaults(run=_migrate)

    replay_cmd = command("replay", "publish the events capture spilled while the log was down "
                         "(serve does it by itself), and with --dead-letters the dead letters")
    replay_cmd.add_argument("--dead-letters", action="store_true",
                            help="also publish each dead letter to its topic again, once what rejected it is fixed")
    storage_options(replay_cmd)
    replay_cmd.set_defaults(run=_replay)

    lag_cmd = command("lag", "how far each consumer is behind its topic (records its group has not committed, "
                      "and how long the oldest has waited), and the dead letters; beside a running serve")
    storage_options(lag_cmd)
    lag_cmd.add_argument("--json", action="store_true", help="print it as JSON")
    lag_cmd.set_defaults(run=_lag)

    purge_cmd = command("purge", "delete what is past retention from every store "
                        "(serve does it hourly; BLACKBOX_RETENTION_DAYS, default 90)")
    storage_options(purge_cmd)
    purge_cmd.set_defaults(run=_purge)

    openapi_cmd = command("openapi", "print the API's OpenAPI 3.1 document, generated from the handlers "
                          "(the checked-in api/openapi.yaml is this: `make openapi` writes it)")
    openapi_cmd.add_argument("--output", type=Path, default=None, help="write it to this file instead")
    openapi_cmd.set_defaults(run=_openapi)

    _measuring_commands(command)
    register_smoke(command)
    return root


def main(argv: list[str] | None = None) -> int:
    args, unknown = parser().parse_known_args(argv)
    if unknown:  # the root's parse_args would point at `blackbox --help`, which lists no command's options
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        print("blackbox: interrupted", file=sys.stderr)
        return 130
    except UserError as exc:
        if args.debug:
            raise
        print(f"blackbox: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        if args.debug:
            raise
        first = next(iter(str(exc).splitlines()), "")
        print(f"blackbox: {type(exc).__name__}: {first}; run again with --debug for the traceback", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # while the imports take, as the blackbox script (cli.entry) answers it
        print("blackbox: interrupted", file=sys.stderr)
        sys.exit(130)
