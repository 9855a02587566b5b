"""`blackbox invoke` never touches a live deployment's state unless asked: a sample event's offsets
committed into a live offset table make its consumer skip real events."""

from __future__ import annotations

import json
import os

import pytest

from adapters.factory import Adapters
from cli.main import main
from lambdas import session_counter
from local_runtime.context import LocalContext
from local_runtime.server import lock_data_dir
from tests.conftest import EVENTS, load_event


def invoke_session_counter(*options: str) -> int:
    return main(["invoke", "session-counter", "--event", str(EVENTS / "session-counter.json"), *options])


def test_invoke_runs_on_a_scratch_data_directory_by_default(
    adapters: Adapters, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setenv("BLACKBOX_DATA_DIR", str(adapters.settings.data_dir))  # the live one is the default
    assert invoke_session_counter() == 0
    assert json.loads(capsys.readouterr().out) == {"counted": 2}
    # the live deployment has seen none of it: the same records still count there
    event = load_event("session-counter.json")
    assert session_counter.handler(event, LocalContext("session-counter")) == {"counted": 2}


def test_invoke_refuses_a_data_directory_a_serve_holds_unless_live(
    adapters: Adapters, capsys: pytest.CaptureFixture[str]
):
    live = str(adapters.settings.data_dir)
    serving = lock_data_dir(adapters.settings.data_dir)  # as serve does
    try:
        assert invoke_session_counter("--data-dir", live) == 2
        [error] = capsys.readouterr().err.splitlines()
        assert f"another blackbox serve is using {live}" in error and "--live" in error
        assert invoke_session_counter("--data-dir", live, "--live") == 0
        assert json.loads(capsys.readouterr().out) == {"counted": 2}
    finally:
        os.close(serving)
    assert invoke_session_counter("--data-dir", live) == 0  # nobody serves it now
    assert json.loads(capsys.readouterr().out) == {"counted": 0}  # the same records, counted already


@pytest.mark.services
def test_invoke_on_the_shared_services_engines_only_when_asked(capsys: pytest.CaptureFixture[str]):
    """No scratch directory keeps a sample out of the engines' offset tables."""
    assert invoke_session_counter("--profile", "services") == 2
    [error] = capsys.readouterr().err.splitlines()
    assert "--live" in error
