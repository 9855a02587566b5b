from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.factory import Adapters, Settings, build, install

EVENTS = Path(__file__).resolve().parent.parent / "events"


@pytest.fixture
def adapters(tmp_path: Path) -> Iterator[Adapters]:
    """A fresh embedded deployment, installed for the handlers of this process."""
    built = build(Settings(data_dir=tmp_path / "data"))
    install(built)
    yield built
    install(None)
    built.close()


def load_event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return event
