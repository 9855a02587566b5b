"""Every `blackbox` error is one line saying what to do (exit 2), with no traceback unless --debug;
`make serve` takes PORT= and HOST=. None of these needs an engine: an engine "not started" is a
port nothing listens on."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from adapters.embedded.index import SqliteIndexDatabase
from adapters.factory import Adapters, build
from adapters.settings import Settings
from cli.main import main
from loadgen.profiles import PROFILES, arrivals
from loadgen.run import LoadConfig, LoadReport, Outcome, Verification
from local_runtime.process import free_port
from local_runtime.server import _address, lock_data_dir
from pipeline.topics import SESSIONS, dead_letter
from ports import LogRecord
from ports.timeutil import now_ms
from tests.conftest import EVENTS

ROOT = Path(__file__).resolve().parents[2]


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert "Traceback" not in captured.err and captured.out == ""
    return line


def invoke(function: str, event: Path | str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["invoke", function, "--event", str(event)]) == 2
    return one_line(capsys)


def test_invoke_without_its_event_file_names_a_sample(capsys: pytest.CaptureFixture[str]):
    line = invoke("capture", "nope.json", capsys)
    assert "no event file nope.json" in line and "--event events/capture-crash.json" in line


@pytest.mark.parametrize(("function", "event", "expected"), [
    ("session-counter", EVENTS / "capture-crash.json",
     "is not an MSK event, which session-counter takes (it has no bootstrapServers, records, eventSource, "
     "eventSourceArn); try --event events/session-counter.json"),
    ("capture", EVENTS / "session-counter.json",
     "is not an API Gateway proxy event, which capture takes (it has no httpMethod, path); "
     "try --event events/capture-crash.json"),
])
def test_invoke_with_an_event_of_another_shape_names_the_right_sample(
    function: str, event: Path, expected: str, capsys: pytest.CaptureFixture[str]
):
    assert expected in invoke(function, event, capsys)


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("topic", None, "(it has no records.sessions-1.0.topic)"),
    ("partition", "one", "(records.sessions-1.0.partition: Input should be a valid integer"),
])
def test_invoke_with_a_broken_msk_record_names_the_field(
    field: str, value: str | None, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Not the handler's KeyError: 'topic' and a pointer to --debug."""
    event = json.loads((EVENTS / "session-counter.json").read_text())
    [record] = event["records"]["sessions-1"]
    if value is None:
        del record[field]
    else:
        record[field] = value
    broken = tmp_path / "event.json"
    broken.write_text(json.dumps(event))
    line = invoke("session-counter", broken, capsys)
    assert f"{broken} is not an MSK event, which session-counter takes {expected}" in line
    assert line.endswith("; try --event events/session-counter.json")


@pytest.mark.parametrize(("content", "expected"), [
    ("{", "is not JSON (Expecting property name enclosed in double quotes at line 1, column 2)"),
    ("[1, 2]", "is not an API Gateway proxy event"),
])
def test_invoke_with_a_file_that_is_no_event_says_why(
    content: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    event = tmp_path / "event.json"
    event.write_text(content)
    assert expected in invoke("capture", event, capsys)


@pytest.mark.parametrize(("content", "expected"), [
    (None, "is a directory"), (b"\xff\xfe{}", "is not UTF-8"),
    (b'{"httpMethod": "POST"}', "it has no path"),
])
def test_invoke_with_an_event_file_it_cannot_read_says_why(content: bytes | None, expected: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]):
    """Found from outside: a directory, bytes not UTF-8, or an API event without its path were
    IsADirectoryError, UnicodeDecodeError and KeyError: 'path' (exit 1)."""
    event = tmp_path / "event.json"
    event.mkdir() if content is None else event.write_bytes(content)
    line = invoke("capture", event, capsys)
    assert expected in line and "--event events/capture-crash.json" in line, line


@pytest.mark.parametrize("output", ["/proc/no-such-dir/openapi.yaml", "."])
def test_openapi_to_a_file_it_cannot_write_is_one_line(output: str, capsys: pytest.CaptureFixture[str]):
    """Found from outside: FileNotFoundError and IsADirectoryError (exit 1)."""
    assert main(["openapi", "--output", output]) == 2
    assert f"{output} cannot be written" in one_line(capsys)


def test_an_unknown_function_is_one_line_listing_the_known(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_:
        main(["invoke", "capture-crash", "--event", "events/capture-crash.json"])
    assert exit_.value.code == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and "invalid choice: 'capture-crash'" in line and "'capture'" in line


@pytest.mark.parametrize(("variable", "value", "named"), [
    ("BLACKBOX_PROFILE", "bogus", "BLACKBOX_PROFILE: Input should be 'embedded', 'services' or 'aws'"),
    ("BLACKBOX_API_KEYS__READ", "k-1", 'field "api_keys"'),
])
def test_a_bad_setting_is_named_without_its_value(
    variable: str, value: str, named: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
):
    """Not the value: it may be a key."""
    monkeypatch.setenv(variable, value)
    assert main(["migrate", "--data-dir", str(tmp_path)]) == 2
    line = one_line(capsys)
    assert named in line and value not in line


def test_a_misspelt_setting_is_named_with_the_one_it_may_mean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]):
    """Found from outside: BLACKBOX_MYSQL_URI (for _URL) was ignored, and migrate went to the default
    database; BLACKBOX_KAFKA_BOOTSTRAP_SERVERS made lag read the local broker and say all was well."""
    monkeypatch.setenv("BLACKBOX_MYSQL_URI", "mysql://u:secret-pw@db.example:3306/x")
    monkeypatch.setenv("BLACKBOX_SPIKES__FACTORR", "5")
    monkeypatch.setenv("BLACKBOX_NOTHING_LIKE_IT", "1")
    for known in ("BLACKBOX_SPIKES__FACTOR", "BLACKBOX_API_KEYS__READ", "BLACKBOX_KEY", "BLACKBOX_STACKWALK"):
        monkeypatch.setenv(known, "5" if known == "BLACKBOX_SPIKES__FACTOR" else '["k"]')
    # from a review: a dict's entries are read from names of their own
    monkeypatch.setenv("BLACKBOX_KEY_SKUS__abc", '["s:pc"]')
    made = build(Settings(data_dir=tmp_path))
    made.log.close()
    assert main(["migrate", "--data-dir", str(tmp_path)]) == 0
    told = capsys.readouterr().err.splitlines()
    assert [line for line in told if "is no setting" in line] == [
        "blackbox: BLACKBOX_MYSQL_URI is no setting, and is ignored (BLACKBOX_MYSQL_URL?)",
        "blackbox: BLACKBOX_NOTHING_LIKE_IT is no setting, and is ignored",
        "blackbox: BLACKBOX_SPIKES__FACTORR is no setting, and is ignored (BLACKBOX_SPIKES__FACTOR?)",
    ]
    assert "secret-pw" not in "\n".join(told)


def test_a_misspelt_setting_in_the_services_env_file_is_named_with_where(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Found from outside: the settings read the file as they read the environment, and a misspelt
    name there was ignored without a word."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".services").mkdir()
    (tmp_path / ".services/services.env").write_text(
        "# the engines\nBLACKBOX_KAFKA_BOOTSTRAP=127.0.0.1:1\nexport BLACKBOX_KAFKA_TOPIC_PREFX=a-\n\n"
        "BLACKBOX_BOTH_PLACES=1\n")
    monkeypatch.setenv("BLACKBOX_BOTH_PLACES", "1")
    build(Settings(data_dir=tmp_path / "data")).log.close()
    assert main(["migrate", "--data-dir", str(tmp_path / "data")]) == 0
    assert [line for line in capsys.readouterr().err.splitlines() if "is no setting" in line] == [
        "blackbox: BLACKBOX_BOTH_PLACES is no setting, and is ignored",
        "blackbox: BLACKBOX_KAFKA_TOPIC_PREFX (in .services/services.env) is no setting, and is ignored "
        "(BLACKBOX_KAFKA_TOPIC_PREFIX?)",
    ]


def test_a_title_key_among_server_keys_says_title_keys_are_for_ingest(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Found from outside: it said "Input should be a valid string"."""
    monkeypatch.setenv("BLACKBOX_API_KEYS__SERVER", '[{"key": "k-title", "skus": ["a:b"]}]')
    assert main(["migrate", "--data-dir", str(tmp_path)]) == 2
    line = one_line(capsys)
    assert "BLACKBOX_API_KEYS__SERVER: " in line and "k-title" not in line, line
    assert "title keys ({key, skus}) are for BLACKBOX_API_KEYS__INGEST only" in line, line


@pytest.mark.parametrize("where", ["environment", "file"])
@pytest.mark.parametrize(("variable", "value"), [("BLACKBOX_PROFILE", "bogus"), ("BLACKBOX_API_KEYS__READ", "k-1")])
def test_a_bad_setting_says_where_it_was_set(
    where: str, variable: str, value: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
):
    """Found from outside: "fix it in the environment or in .services/services.env" where no such file
    is (the embedded profile's)."""
    monkeypatch.chdir(tmp_path)  # the services env file is read from the working directory
    if where == "file":
        (tmp_path / ".services").mkdir()
        (tmp_path / ".services" / "services.env").write_text(f"{variable}={value}\n")
    else:
        monkeypatch.setenv(variable, value)
    assert main(["migrate", "--data-dir", str(tmp_path / "data")]) == 2
    line = one_line(capsys)
    expected = "fix it in .services/services.env" if where == "file" else "fix it in the environment"
    assert line.endswith(expected), line


def test_an_unknown_option_points_at_the_commands_help(capsys: pytest.CaptureFixture[str]):
    """Found from outside: `serve --prot 9000` pointed at `blackbox --help`, which lists no serve option."""
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--prot", "9000"])
    line = capsys.readouterr().err.strip()
    assert exited.value.code == 2 and "\n" not in line, line
    assert "unrecognized arguments: --prot 9000" in line and line.endswith("see blackbox serve --help"), line


@pytest.mark.parametrize("argv", [
    ["serve", "--workers", "99999999999"], ["serve", "--workers", "\u00b2"], ["serve", "--port", "\u00b2"],
    ["serve", "--data-dir", ""], ["invoke", "capture", "--data-dir", ""],
    ["load", "--rate", "inf"], ["load", "--rate", "nan"], ["load", "--rate", "0"], ["load", "--rate", "-5"],
    ["load", "--duration", "0"], ["load", "--duration", "-1"], ["load", "--duration", "1e400"],
    ["load", "--crash-kb", "0"], ["load", "--batch", "0"], ["load", "--batch", "501"],
    ["load", "--mix", "crashes=-1,sessions=2"], ["load", "--mix", "crashes=0,sessions=0,scores=0"],
    ["load", "--mix", "crashs=1"], ["load", "--mix", "sessions=nan"], ["load", "--watch-pid", "-1"],
    ["bench", "--soak", "0"], ["bench", "--soak", "nan"], ["smoke", "--timeout", "0"], ["smoke", "--timeout", "inf"],
])
def test_a_number_out_of_what_an_option_takes_is_one_line_before_anything_runs(
        argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """Found from outside: `load --rate inf` ran until the kernel killed it at 20 GB, `serve --workers
    99999999999` made a list of as many workers before starting any, `--data-dir ''` served from the
    current directory, and a rate, duration, size or mix of nothing sent nothing and said all was well."""
    monkeypatch.setattr("loadgen.run.run", lambda _config: pytest.fail("load ran"))
    monkeypatch.setattr("cli.main.serve", lambda *_args: pytest.fail("serve ran"))
    with pytest.raises(SystemExit) as exited:
        main(argv)
    line = capsys.readouterr().err.strip()
    assert exited.value.code == 2 and "\n" not in line and f"argument {argv[-2]}" in line, line
    assert "invalid" not in line, line  # says what it takes, not a parser function's name


@pytest.mark.parametrize("argv", [
    ["--rate", "100000", "--duration", "10800"], ["--profile", "spike", "--rate", "2200", "--duration", "100"],
    ["--rate", "0.001"], ["--duration", "0.001"],  # not one request
    ["--watch-pid", "999999999"], ["--json", "/proc/no-such-dir/results.json"],
])
def test_load_refuses_what_it_cannot_do_before_it_sends(argv: list[str], monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]):
    """Found from outside: a run of billions of requests was planned in memory first, one of none said
    all was well; a process to watch that was not there, or a results file that could not be written,
    failed after the run."""
    monkeypatch.setattr("loadgen.run.run", lambda _config: pytest.fail("load ran"))
    assert main(["load", *argv]) == 2
    assert "--" in one_line(capsys)


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_what_load_plans_is_its_profiles_mean_rate_times_its_duration(profile: str):
    """The bound on what a run plans is checked on that product, before arrivals() makes the plan."""
    planned = len(arrivals(PROFILES[profile], 100, 60))
    assert planned == pytest.approx(100 * 60 * PROFILES[profile].mean, rel=0.01)


@pytest.mark.parametrize("command", [["serve"], ["lag"], ["migrate"],
                                     ["invoke", "capture", "--event", str(EVENTS / "capture-crash.json")]])
def test_the_aws_profile_is_the_deployments_not_a_commands(command: list[str], monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]):
    """Found from outside: BLACKBOX_PROFILE=aws, which the settings take for the Lambda functions, made
    serve a GetParameterError and lag wait 10 s for an OAuth token (exit 1)."""
    monkeypatch.setenv("BLACKBOX_PROFILE", "aws")
    monkeypatch.setattr("cli.main.serve", lambda *_args: pytest.fail("serve ran"))
    assert main(command) == 2
    line = one_line(capsys)
    assert "BLACKBOX_PROFILE=aws" in line and "--profile" in line, line


def test_an_engine_not_started_is_named_with_how_to_start_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    nowhere = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv("BLACKBOX_KAFKA_BOOTSTRAP", nowhere)
    assert main(["replay", "--profile", "services", "--data-dir", str(tmp_path)]) == 2
    line = one_line(capsys)
    assert f"Kafka does not answer at {nowhere} (Connection refused)" in line and "scripts/services start" in line
    # found from outside: a studio's own engines were told only to start the local ones
    assert "or set BLACKBOX_KAFKA_BOOTSTRAP to where yours listens" in line, line


def test_a_couchbase_over_tls_is_looked_for_on_its_tls_port():
    """Found from outside: couchbases:// was probed on 11210, the plaintext port."""
    assert _address("couchbases://cb.example.com", 11210, 11207) == ("cb.example.com", 11207)
    assert _address("couchbase://cb.example.com", 11210, 11207) == ("cb.example.com", 11210)
    assert _address("couchbases://u:p@cb-1:18207,cb-2", 11210, 11207) == ("cb-1", 18207)


@pytest.mark.services
def test_migrate_on_services_waits_for_mysql_alone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]):
    """Found in review: it refused to run while Kafka or Couchbase was down, which it does not use."""
    monkeypatch.setenv("BLACKBOX_KAFKA_BOOTSTRAP", f"127.0.0.1:{free_port()}")
    monkeypatch.setenv("BLACKBOX_COUCHBASE_URL", f"couchbase://127.0.0.1:{free_port()}")
    assert main(["migrate", "--profile", "services", "--data-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("applied ")


def test_an_unexpected_error_is_one_line_pointing_at_debug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    def broken(_event: object, _context: object) -> None:
        raise RuntimeError("a bug\nwith a second line")

    monkeypatch.setattr("cli.main.load_handler", lambda _name: broken)
    assert main(["invoke", "capture", "--event", str(EVENTS / "capture-crash.json")]) == 1
    assert one_line(capsys) == "blackbox: RuntimeError: a bug; run again with --debug for the traceback"


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_shows_the_traceback(where: str):
    command = ["invoke", "capture", "--event", "nope.json"]
    debug = ["--debug", *command] if where == "before" else [*command, "--debug"]
    run = [sys.executable, "-m", "cli.main"]
    plain = subprocess.run([*run, *command], capture_output=True, text=True, cwd=ROOT, check=False)
    shown = subprocess.run([*run, *debug], capture_output=True, text=True, cwd=ROOT, check=False)
    assert plain.returncode == 2 and len(plain.stderr.splitlines()) == 1 and "Traceback" not in plain.stderr
    assert shown.returncode != 0 and "Traceback" in shown.stderr and "UserError: no event file" in shown.stderr


def test_a_data_directory_that_cannot_be_written_is_one_line_naming_it(capsys: pytest.CaptureFixture[str]):
    """Found by a newcomer: a data directory not writable (or under /proc) was a bare OSError, where
    one that is a file is told as a mistake of --data-dir."""
    assert main(["serve", "--port", str(free_port()), "--data-dir", "/proc/blackbox-data"]) == 2
    line = one_line(capsys)
    assert line.startswith("blackbox: /proc/blackbox-data cannot be written (No such file or directory)"), line
    assert "--data-dir" in line


def test_serve_on_a_taken_port_says_so_and_names_a_free_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port), "--data-dir", str(tmp_path)]) == 2
        line = one_line(capsys)  # and nothing announced on stdout
        assert f"port {port} on 127.0.0.1 is in use" in line
        suggestion = re.search(r"try --port (\d+)", line)
        assert suggestion is not None and int(suggestion[1]) != port
        suggested = int(suggestion[1])
        socket.create_server(("127.0.0.1", suggested)).close()  # free indeed


def test_load_against_nothing_says_so_before_sending(capsys: pytest.CaptureFixture[str]):
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["load", "--url", url, "--duration", "30"]) == 2
    line = one_line(capsys)
    assert f"nothing answers at {url}" in line and "blackbox serve" in line


@pytest.mark.parametrize("url", ["localhost:8080", "127.0.0.1:8080", "ftp://127.0.0.1:8080", "http://"])
def test_load_refuses_a_url_without_http_or_https(url: str, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]):
    """Found from outside: `--url localhost:8080` said "nothing answers at localhost:8080
    (UnsupportedProtocol)" with the server up."""
    monkeypatch.setattr("loadgen.run.run", lambda _config: pytest.fail("load ran"))
    with pytest.raises(SystemExit) as exited:
        main(["load", "--url", url])
    line = capsys.readouterr().err.strip()
    assert exited.value.code == 2 and "\n" not in line, line
    assert "argument --url" in line and "http:// or https://" in line, line


def test_load_whose_every_score_is_refused_says_so_and_fails(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]):
    """Found from outside: with an ingest key every score was 403, and load still ended "lost = 0",
    exit 0 (nothing refused is accepted, so nothing is lost)."""
    outcomes = [Outcome("crashes", 0.0, 202, 5.0), Outcome("crashes", 0.0, 413, 5.0),
                Outcome("sessions", 0.0, 202, 5.0), *(Outcome("scores", 0.0, 403, 5.0) for _ in range(3))]
    report = LoadReport(LoadConfig(url="http://127.0.0.1:1"), "r", 0, 1.0, outcomes, Verification(), 0)
    monkeypatch.setattr("loadgen.run.run", lambda _config: report)
    assert main(["load", "--api-key", "k-ingest", "--read-key", "k-read"]) == 3
    captured = capsys.readouterr()
    assert "lost = 0" in captured.out
    [warning] = captured.err.splitlines()
    assert "scores" in warning and "403" in warning and "--api-key" in warning, warning
    assert "crashes" not in warning and "sessions" not in warning, warning


def test_load_takes_its_keys_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    """Found from outside: keys only on the command line, which every user of the machine reads in `ps`."""
    told: list[LoadConfig] = []
    report = LoadReport(LoadConfig(url="http://127.0.0.1:1"), "r", 0, 1.0, [], Verification(), 0)
    monkeypatch.setattr("loadgen.run.run", lambda config: told.append(config) or report)
    monkeypatch.setenv("BLACKBOX_KEY", "k-from-env")
    monkeypatch.setenv("BLACKBOX_READ_KEY", "k-read-from-env")
    main(["load"])
    main(["load", "--api-key", "k-given", "--read-key", "k-read-given"])
    # from a review: its scores need a server key, which the README's BLACKBOX_KEY is not
    monkeypatch.setenv("BLACKBOX_SERVER_KEY", "k-server-from-env")
    main(["load"])
    assert [(c.api_key, c.read_key) for c in told] == [
        ("k-from-env", "k-read-from-env"), ("k-given", "k-read-given"), ("k-server-from-env", "k-read-from-env")]


@pytest.mark.parametrize("page", [None, b"<html>a page</html>", b'{"items": []}'])
def test_load_against_a_server_that_is_not_blackbox_says_so_before_sending(
        page: bytes | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """Found from outside: the run went ahead, and its final check ended in KeyError: 'reports'."""
    if page is not None:
        (tmp_path / "v1").mkdir()
        (tmp_path / "v1" / "crashes").write_bytes(page)
    class Files(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # stderr is the CLI's, here
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Files, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert main(["load", "--url", url, "--duration", "30"]) == 2
    finally:
        server.shutdown()
    line = one_line(capsys)
    assert f"{url} does not answer as Blackbox does" in line and "--url" in line


def test_replaying_dead_letters_on_the_embedded_profile_waits_for_nothing(
    adapters: Adapters, capsys: pytest.CaptureFixture[str]
):
    """The embedded log has no consumer group to join: the waits Kafka needs were 10 s of silence."""
    dead_letter(adapters.log, [(LogRecord(SESSIONS, 0, 7, b"not json", None, (), now_ms()), "a bug since fixed")])
    replay = ["replay", "--dead-letters", "--data-dir", str(adapters.settings.data_dir)]
    for expected in ("replayed 1 dead letter(s)\n  sessions: 1", "replayed 0 dead letter(s)"):
        started = time.monotonic()
        assert main(replay) == 0
        assert time.monotonic() - started < 1.5
        assert expected in capsys.readouterr().out


def make_serve(*options: str) -> str:
    """The command `make serve` would run, with a PORT and a HOST in the environment (not options)."""
    env = {"PATH": "/usr/bin:/bin", "PORT": "9100", "HOST": "a-machine-name"}
    done = subprocess.run(["make", "-n", "serve", *options], capture_output=True, text=True, cwd=ROOT, env=env,
                          check=True)
    return done.stdout.splitlines()[-1]


def test_make_serve_passes_port_and_host_from_its_command_line_only():
    assert make_serve("PORT=9000", "HOST=0.0.0.0").endswith("blackbox serve --port '9000' --host '0.0.0.0'")
    assert make_serve().endswith("blackbox serve")  # a shell's own HOST and PORT are not for make


def test_make_serve_passes_a_data_dir():
    """Found from outside: a second `make serve PORT=8081` was told to pass --data-dir, which make could not."""
    assert make_serve("PORT=8081", "DATA_DIR=second-data").endswith("--port '8081' --data-dir 'second-data'")
    # found in review: a path with a space was two arguments
    assert make_serve("DATA_DIR=my data").endswith("--data-dir 'my data'")


def test_serve_on_a_data_dir_in_use_names_make_serves_data_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    held = lock_data_dir(tmp_path)
    try:
        assert main(["serve", "--port", str(free_port()), "--data-dir", str(tmp_path)]) == 2
    finally:
        os.close(held)
    line = one_line(capsys)
    assert f"another blackbox serve is using {tmp_path}" in line and "--data-dir" in line, line
    assert "make serve DATA_DIR=" in line, line


def test_serve_on_a_taken_port_and_a_data_dir_in_use_says_blackbox_is_already_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Found from outside: following "port in use; try make serve PORT=8081" only led to the data
    directory being in use: both taken is a serve already running."""
    held = lock_data_dir(tmp_path)
    try:
        with socket.create_server(("127.0.0.1", 0)) as taken:
            port = taken.getsockname()[1]
            assert main(["serve", "--port", str(port), "--data-dir", str(tmp_path)]) == 2
    finally:
        os.close(held)
    line = one_line(capsys)
    assert "Blackbox is already running" in line and str(port) in line and str(tmp_path) in line, line


def test_invoke_prints_the_answer_alone_on_stdout(capsys: pytest.CaptureFixture[str]):
    """Found by a newcomer: the handler's metrics line came first on stdout, so `| python -m json.tool`
    failed."""
    assert main(["invoke", "capture", "--event", str(EVENTS / "capture-crash.json")]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["statusCode"] == 202  # a cold start's metrics line, if any, on stderr


def test_invoke_prints_no_log_line_on_stdout(capsys: pytest.CaptureFixture[str]):
    """Found in review: the purge's log line came before the answer on stdout."""
    assert main(["invoke", "purge", "--event", str(EVENTS / "purge-scheduled.json")]) == 0
    out = capsys.readouterr()
    assert "log_records" in json.loads(out.out) and "purged what is past retention" in out.err


@pytest.mark.parametrize("command", [["purge"], ["replay"], ["replay", "--dead-letters"], ["migrate"]])
def test_a_command_on_existing_data_refuses_a_directory_without_it(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Found from outside: `purge --data-dir <a mistyped path>` made the directory and said it purged
    nothing; so did replay."""
    missing = tmp_path / "mistyped"
    assert main([*command, "--data-dir", str(missing)]) == 2
    line = one_line(capsys)
    assert str(missing) in line and "no Blackbox data" in line, line
    assert not missing.exists()


@pytest.mark.parametrize("command", [["serve"], ["purge"],
                                     ["invoke", "purge", "--event", str(EVENTS / "purge-scheduled.json")]])
@pytest.mark.parametrize("where", ["notes.txt", "notes.txt/data", "dangling"])
def test_a_data_dir_that_is_a_file_is_one_line(command: list[str], where: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]):
    """Found from outside: a raw FileExistsError; in review, a raw NotADirectoryError for a path
    under a file, and FileExistsError again for a link to nothing."""
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    data_dir = tmp_path / where
    assert main([*command, "--data-dir", str(data_dir)]) == 2
    line = one_line(capsys)
    assert str(data_dir) in line and "not a directory" in line, line
    assert a_file.read_text() == "mine"


def test_invoke_on_its_scratch_directory_minds_no_blackbox_data_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]):
    """Found in review: invoke, which runs on a scratch directory of its own, refused to run where
    ./blackbox-data was a file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "blackbox-data").write_text("mine")
    assert main(["invoke", "purge", "--event", str(EVENTS / "purge-scheduled.json")]) == 0
    assert "log_records" in json.loads(capsys.readouterr().out)


# the last shared migration, and how to take it back
LAST_MIGRATION = "shared/0017_window_filters.sql"
UNDO_LAST = "DROP INDEX reports_sku_received_groups"


def test_migrate_applies_an_embedded_data_dirs_pending_migrations(adapters: Adapters,
                                                                   capsys: pytest.CaptureFixture[str]):
    """Found from outside: on embedded it said "applied 0 migration(s)" with six pending, which the
    next command to open the files applied (serve, without a word in its log)."""
    adapters.log.ping()  # a serve's data directory, with its files
    adapters.documents.ping()
    index = SqliteIndexDatabase(adapters.settings.data_dir / "index.sqlite")
    with index.db.write() as conn:
        conn.execute("DELETE FROM schema_migrations WHERE version = ?", (LAST_MIGRATION,))
        conn.execute(UNDO_LAST)
    assert main(["migrate", "--data-dir", str(adapters.settings.data_dir)]) == 0
    out = capsys.readouterr()
    assert out.out == f"applied 1 migration(s)\n  index.sqlite: {LAST_MIGRATION}\n"
    # the log line serve writes too as it applies them (review: a logger no handler wrote out)
    [line] = [json.loads(line) for line in out.err.splitlines() if LAST_MIGRATION in line]
    assert line["path"] == str(adapters.settings.data_dir / "index.sqlite"), line
    assert index.run("SELECT name FROM sqlite_master WHERE name = 'reports_sku_received_groups'", ()) != []
    index.close()
    assert main(["migrate", "--data-dir", str(adapters.settings.data_dir)]) == 0
    assert capsys.readouterr().out == "applied 0 migration(s)\n"


def test_purge_prints_its_summary_alone_on_stdout(adapters: Adapters, capsys: pytest.CaptureFixture[str]):
    """Found from outside: its JSON log line came first on stdout."""
    adapters.log.ping()  # a serve's data directory
    assert main(["purge", "--data-dir", str(adapters.settings.data_dir)]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines()[0] == "purged what is past retention:", out.out
    assert "purged what is past retention" in out.err
