"""The data directory holds webhooks' signing secrets and players' reports: made for its user alone."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from adapters.factory import build
from adapters.settings import Settings
from local_runtime.server import lock_data_dir


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# found from outside: made with the umask's 0755, its index.sqlite (webhook secrets in plain text)
# and documents (players' emails) were readable by every user of the machine
def test_a_data_directory_made_by_any_first_use_is_its_users_alone(tmp_path: Path):
    for first in ("index", "log", "documents", "spill", "symbols"):
        data_dir = tmp_path / first / "data"
        adapters = build(Settings(data_dir=data_dir))
        try:
            getattr(adapters, first)
            assert mode(data_dir) == 0o700, first
        finally:
            adapters.close()
    served = tmp_path / "served" / "data"
    os.close(lock_data_dir(served))
    assert mode(served) == 0o700


def test_a_data_directory_made_before_is_left_as_it_is(tmp_path: Path):
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o750)
    adapters = build(Settings(data_dir=data_dir))
    try:
        assert adapters.index is not None
    finally:
        adapters.close()
    assert mode(data_dir) == 0o750
