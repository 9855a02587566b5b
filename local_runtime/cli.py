"""The `blackbox` command line (DESIGN §6)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from adapters.factory import Settings, build, install, migrate
from core.timeutil import now_ms
from core.topics import replay_dead_letters, replay_spilled
from local_runtime.functions import FUNCTIONS, LocalContext, load_handler
from local_runtime.server import DataDirInUse, lock_data_dir, serve


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {"data_dir": args.data_dir} if args.data_dir is not None else {}
    if args.profile is not None:
        overrides["profile"] = args.profile
    return Settings(**overrides)


def _serve(args: argparse.Namespace) -> int:
    try:
        serve(_settings(args), args.host, args.port)
    except DataDirInUse as exc:
        print(f"blackbox: {exc}", file=sys.stderr)
        return 1
    return 0


def _invoke(args: argparse.Namespace) -> int:
    """On a scratch data directory unless told otherwise: a sample event run on a live deployment's
    data commits the sample's offsets into its offset table, and its consumers then skip real events."""
    settings = _settings(args)
    with ExitStack() as cleanup:
        if not args.live:
            if settings.profile != "embedded":
                print("blackbox: invoke on the services profile writes to the engines a serve may be using "
                      "(offsets, reports, counters); pass --live to do so", file=sys.stderr)
                return 1
            if args.data_dir is None:
                scratch = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="blackbox-invoke-"))
                settings = settings.model_copy(update={"data_dir": Path(scratch)})
            else:
                try:
                    cleanup.callback(os.close, lock_data_dir(settings.data_dir))
                except DataDirInUse as exc:
                    print(f"blackbox: {exc}; pass --live to invoke beside it", file=sys.stderr)
                    return 1
        adapters = build(settings)
        install(adapters)
        cleanup.callback(adapters.close)
        cleanup.callback(install, None)
        event = json.loads(Path(args.event).read_text())
        result = load_handler(args.function)(event, LocalContext(function_name=args.function))
    print(json.dumps(result, indent=2))
    return 0


def _migrate(args: argparse.Namespace) -> int:
    applied = migrate(_settings(args))
    print(f"applied {len(applied)} migration(s)" + "".join(f"\n  {name}" for name in applied))
    return 0


def _replay(args: argparse.Namespace) -> int:
    adapters = build(_settings(args))
    try:
        print(f"replayed {replay_spilled(adapters.log, adapters.spill)} spilled event(s)")
        if args.dead_letters:
            by_topic = replay_dead_letters(adapters.log)
            print(f"replayed {sum(by_topic.values())} dead letter(s)"
                  + "".join(f"\n  {topic}: {n}" for topic, n in sorted(by_topic.items())))
    finally:
        adapters.close()
    return 0


def _purge(args: argparse.Namespace) -> int:
    from retention.purge import purge

    adapters = build(_settings(args))
    try:
        purged = purge(adapters, now_ms())
    finally:
        adapters.close()
    print("purged what is past retention:" + "".join(f"\n  {name}: {n}" for name, n in purged.__dict__.items()))
    return 0


def _load(args: argparse.Namespace) -> int:
    from loadgen.run import LoadConfig, run  # heavy imports only for this command

    shares = dict(part.split("=") for part in args.mix.split(","))
    config = LoadConfig(
        url=args.url, profile=args.profile, rate=args.rate, duration_s=args.duration, crash_kb=args.crash_kb,
        mix=(float(shares.get("crashes", 0)), float(shares.get("sessions", 0)), float(shares.get("scores", 0))),
        batch=args.batch, api_key=args.api_key, read_key=args.read_key, seed=args.seed,
    )
    report = run(config)
    print(report.as_text())
    if args.json is not None:
        args.json.write_text(json.dumps(report.as_json(), indent=2))
    return 0 if report.verification.lost == 0 else 2


def _bench(args: argparse.Namespace) -> int:
    from benchmarks import report  # heavy imports only for this command

    report.run(args.quick, args.output)
    return 0


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="blackbox", description="Crash reporting and leaderboards for online games")
    commands = root.add_subparsers(dest="command", required=True)

    def storage_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", type=Path, default=None, help="embedded data (default ./blackbox-data)")
        p.add_argument("--profile", choices=["embedded", "services"], default=None,
                       help="embedded (SQLite, the default) or services (Kafka, MySQL, Couchbase)")

    serve_cmd = commands.add_parser("serve", help="run the API, the consumers and the workers until stopped")
    serve_cmd.add_argument("--host", default="127.0.0.1")
    serve_cmd.add_argument("--port", type=int, default=8080)
    storage_options(serve_cmd)
    serve_cmd.set_defaults(run=_serve)

    invoke_cmd = commands.add_parser("invoke", help="run one Lambda handler on one sample event")
    invoke_cmd.add_argument("function", choices=sorted(FUNCTIONS))
    invoke_cmd.add_argument("--event", required=True, help="a JSON event file, e.g. events/capture-crash.json")
    storage_options(invoke_cmd)
    invoke_cmd.add_argument("--live", action="store_true",
                            help="run on the data directory (given or default) even while a serve uses it, or on "
                            "the services engines: the sample's records and offsets become that deployment's. "
                            "Without it, invoke runs on a scratch directory unless --data-dir is given")
    invoke_cmd.set_defaults(run=_invoke)

    migrate_cmd = commands.add_parser("migrate", help="apply pending schema migrations to the index database")
    storage_options(migrate_cmd)
    migrate_cmd.set_defaults(run=_migrate)

    replay_cmd = commands.add_parser("replay", help="publish the events capture spilled while the log was down "
                                     "(serve does it by itself), and with --dead-letters the dead letters")
    replay_cmd.add_argument("--dead-letters", action="store_true",
                            help="also publish each dead letter to its topic again, once what rejected it is fixed")
    storage_options(replay_cmd)
    replay_cmd.set_defaults(run=_replay)

    purge_cmd = commands.add_parser("purge", help="delete what is past retention from every store "
                                    "(serve does it hourly; BLACKBOX_RETENTION_DAYS, default 90)")
    storage_options(purge_cmd)
    purge_cmd.set_defaults(run=_purge)

    load_cmd = commands.add_parser("load", help="open-loop load against a running serve (or deployment); "
                                   "checks at the end that nothing accepted was lost (exit 2 if it was)")
    load_cmd.add_argument("--url", default="http://127.0.0.1:8080")
    load_cmd.add_argument("--profile", choices=["steady", "spike", "launch"], default="steady",
                          help="steady; spike: x10 in the middle 40%% of the run; launch: ramp to x5, hold")
    load_cmd.add_argument("--rate", type=float, default=50, help="base requests/s (default 50)")
    load_cmd.add_argument("--duration", type=float, default=30, help="seconds (default 30)")
    load_cmd.add_argument("--crash-kb", type=int, default=100,
                          help="average crash report size: bimodal, small 0.3-5 KB and large 10-512 KB")
    load_cmd.add_argument("--mix", default="crashes=0.2,sessions=0.6,scores=0.2", help="request shares")
    load_cmd.add_argument("--batch", type=int, default=10, help="session events and scores per request")
    load_cmd.add_argument("--api-key", default=None, help="a key that may post (a server key for scores)")
    load_cmd.add_argument("--read-key", default=None, help="a key that may read, for the final check")
    load_cmd.add_argument("--seed", type=int, default=1)
    load_cmd.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    load_cmd.set_defaults(run=_load)

    bench_cmd = commands.add_parser("bench", help="measure, side by side, and write BENCHMARKS.md "
                                    "(needs scripts/services start)")
    bench_cmd.add_argument("--quick", action="store_true", help="smaller sizes and shorter runs")
    bench_cmd.add_argument("--output", type=Path, default=Path("BENCHMARKS.md"))
    bench_cmd.set_defaults(run=_bench)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
