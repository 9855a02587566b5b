"""`blackbox lag`: what each consumer's group has not committed of its topic, beside a running serve."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from adapters.factory import build
from adapters.settings import Settings
from cli.main import LAG_ENGINES, main
from local_runtime.poller import Poller
from local_runtime.server import check_engines
from pipeline.topics import DEADLETTER, SESSIONS
from ports import OutgoingRecord
from ports.errors import UserError
from tests.services import namespace
from tests.services import settings as services_settings


def _lag(capsys: pytest.CaptureFixture[str], data_dir: Path) -> Any:
    assert main(["lag", "--data-dir", str(data_dir), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_lag_counts_what_the_consumers_poller_has_not_committed(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    adapters = build(Settings(profile="embedded", data_dir=tmp_path))
    try:
        adapters.log.publish(SESSIONS, [OutgoingRecord(value=b"{}", key=str(i).encode()) for i in range(5)])
        adapters.log.publish(DEADLETTER, [OutgoingRecord(value=b"{}", key=b"k")])
        time.sleep(0.05)
        before = _lag(capsys, tmp_path)
        counter = next(c for c in before["consumers"] if c["function"] == "session-counter")
        assert counter["behind"] == 5 and 0 <= counter["oldestWaitingS"] < 60
        assert all(c["behind"] == 0 and c["oldestWaitingS"] is None
                   for c in before["consumers"] if c is not counter)
        assert before["deadLetters"] == 1

        # the poller serve runs commits under the group lag reads
        stop, handled = threading.Event(), []
        poller = Poller(adapters.log, "session-counter", SESSIONS, lambda event, _: handled.append(event), stop)
        poller.start()
        deadline = time.monotonic() + 30
        while poller.batches == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        poller.join()
    finally:
        adapters.close()
    after = _lag(capsys, tmp_path)
    assert [c["behind"] for c in after["consumers"]] == [0, 0, 0, 0]


def test_lag_prints_a_line_a_consumer(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    serves = build(Settings(profile="embedded", data_dir=tmp_path))  # a serve's data directory, nothing in it yet
    serves.log.ping()
    serves.close()
    assert main(["lag", "--data-dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["consumer", "topic", "behind", "oldest", "waiting"]
    assert [line.split()[:3] for line in lines[1:5]] == [
        ["crash-consumer", "crashes", "0"], ["session-counter", "sessions", "0"], ["ranking-worker", "scores", "0"],
        ["minidump-processor", "minidumps", "0"]]
    assert lines[5].startswith("dead letters: 0 ")


def test_lag_refuses_a_data_directory_that_holds_no_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """Found from outside: a mistyped --data-dir was made, and lag said every consumer was 0 behind."""
    missing = tmp_path / "mistyped"
    assert main(["lag", "--data-dir", str(missing)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert str(missing) in line and "no Blackbox data" in line
    assert not missing.exists()


def test_lag_on_services_needs_only_kafka(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]):
    """Found from outside: it refused to run for a Couchbase it does not read."""
    with socket.socket() as kafka, socket.socket() as closed:
        kafka.bind(("127.0.0.1", 0))
        kafka.listen()
        closed.bind(("127.0.0.1", 0))  # bound, never listening: refused
        monkeypatch.setenv("BLACKBOX_KAFKA_BOOTSTRAP", f"127.0.0.1:{kafka.getsockname()[1]}")
        monkeypatch.setenv("BLACKBOX_COUCHBASE_URL", f"couchbase://127.0.0.1:{closed.getsockname()[1]}")
        monkeypatch.setenv("BLACKBOX_MYSQL_URL", f"mysql://u:p@127.0.0.1:{closed.getsockname()[1]}/db")
        check_engines(Settings(profile="services", data_dir=tmp_path), only=LAG_ENGINES)
        with pytest.raises(UserError, match="Couchbase"):
            check_engines(Settings(profile="services", data_dir=tmp_path))


def _topics(prefix: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": services_settings().kafka_bootstrap})
    return {name for name in admin.list_topics(timeout=10).topics if name.startswith(prefix)}


@pytest.mark.services
def test_lag_on_a_prefix_no_serve_has_says_so_and_makes_no_topic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]):
    """Found from outside: a mistyped BLACKBOX_KAFKA_TOPIC_PREFIX made the consumers' topics under
    it, and lag reported every consumer caught up."""
    prefix = f"{namespace()}-"
    monkeypatch.setenv("BLACKBOX_KAFKA_TOPIC_PREFIX", prefix)
    assert main(["lag", "--profile", "services", "--data-dir", str(tmp_path)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert repr(prefix) in line and "BLACKBOX_KAFKA_TOPIC_PREFIX" in line
    assert _topics(prefix) == set()


@pytest.mark.services
def test_lag_on_services_names_the_topics_as_kafka_does(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]):
    prefix = f"{namespace()}-"
    monkeypatch.setenv("BLACKBOX_KAFKA_TOPIC_PREFIX", prefix)
    adapters = build(services_settings(kafka_topic_prefix=prefix))
    try:
        adapters.log.publish(SESSIONS, [OutgoingRecord(value=b"{}", key=b"k")])
    finally:
        adapters.close()
    assert main(["lag", "--profile", "services", "--data-dir", str(tmp_path), "--json"]) == 0
    consumers = {c["function"]: c for c in json.loads(capsys.readouterr().out)["consumers"]}
    assert consumers["session-counter"]["topic"] == f"{prefix}sessions" and consumers["session-counter"]["behind"] == 1
    assert consumers["crash-consumer"]["topic"] == f"{prefix}crashes"
    assert _topics(prefix) == {f"{prefix}sessions"}
    assert main(["lag", "--profile", "services", "--data-dir", str(tmp_path)]) == 0
    assert f"{prefix}sessions" in capsys.readouterr().out.split()
