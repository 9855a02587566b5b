"""`blackbox serve --role/--workers`: what cannot work is one line before anything starts, and
the processes planned per role and profile."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.kafka.log import consumer_config
from cli.main import main
from crashes.processing import WALKS
from lambdas.functions import BATCH_RECORDS
from local_runtime.server import Job, jobs
from pipeline.topics import CRASHES, MINIDUMPS
from ports.minidumps import WALK_WALL_S


def test_on_embedded_the_api_and_the_consumers_are_not_split(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["serve", "--role", "consumers", "--data-dir", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("blackbox: --role consumers needs the services profile")
    assert len(captured.err.splitlines()) == 1 and not (tmp_path / "serve.lock").exists()


@pytest.mark.parametrize("workers", ["0", "-1", "two"])
def test_workers_is_a_number_of_processes(workers: str, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--workers", workers])
    assert exited.value.code == 2 and "is not a number of processes" in capsys.readouterr().err


@pytest.mark.parametrize("port", ["99999", "65536", "0", "-1", "http"])
def test_port_is_a_port_number(port: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """Found from outside: --port 99999 was "OverflowError: bind(): port must be 0-65535", exit 1."""

    def serve(*args: object) -> None:
        raise AssertionError("serve ran")

    monkeypatch.setattr("cli.main.serve", serve)
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--port", port])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "argument --port" in err and "1-65535" in err, err


def test_each_role_gets_its_workers_but_embedded_keeps_one_consumer():
    assert jobs("all", 2, "services") == [Job("api", 0), Job("api", 1), Job("consumers", 0), Job("consumers", 1)]
    assert jobs("all", 3, "embedded") == [Job("api", 0), Job("api", 1), Job("api", 2), Job("consumers", 0)]
    assert jobs("api", 2, "services") == [Job("api", 0), Job("api", 1)]
    assert jobs("consumers", 2, "services") == [Job("consumers", 0), Job("consumers", 1)]


def test_a_key_under_two_roles_stops_serve_naming_both_variables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Found from outside: the key got one of its roles, silently ("1 ingest, 0 server, 1 read"),
    and posting with it was 403."""
    monkeypatch.setenv("BLACKBOX_API_KEYS__READ", '["k-twice"]')
    monkeypatch.setenv("BLACKBOX_API_KEYS__INGEST", '["k-once", {"key": "k-twice", "skus": ["a:b"]}]')

    def listen(host: str, port: int) -> None:
        raise AssertionError("serve went as far as binding its port")

    monkeypatch.setattr("local_runtime.server.listen", listen)
    assert main(["serve", "--data-dir", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert captured.out == "" and "k-twice" not in line, line
    assert "BLACKBOX_API_KEYS__INGEST" in line and "BLACKBOX_API_KEYS__READ" in line, line
    assert not (tmp_path / "serve.lock").exists()


def test_a_minidump_batch_at_its_worst_keeps_its_consumer_in_the_group():
    """Left alone in a note, then mended: librdkafka's max.poll.interval.ms (300 s) was below the
    longest batch serve's minidump poller may hand its handler, whose member would then be put out
    of the group and its batch walked again by another."""
    worst_ms = BATCH_RECORDS["minidump-processor"] * WALKS * WALK_WALL_S * 1000
    assert consumer_config({}, "blackbox-minidump-processor", MINIDUMPS)["max.poll.interval.ms"] > worst_ms
    # found in review: a consumer of another topic that hangs keeps its partitions 5 minutes, not 20
    assert consumer_config({}, "blackbox-crash-consumer", CRASHES)["max.poll.interval.ms"] == 300_000
