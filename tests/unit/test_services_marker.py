"""`pytest -m "not services"` leaves out every test on the engines of scripts/services: the contract
suites' and the end-to-end serves' services cases go, their embedded cases stay."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def collected(*args: str) -> list[str]:
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                            cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_the_services_cases_are_deselected_and_the_embedded_kept():
    kept = collected("tests/contract", "tests/e2e/test_serve.py", "tests/e2e/test_dashboard.py", "-m", "not services")
    assert kept and all("[services" not in test and "-services" not in test for test in kept), kept
    assert any("tests/contract/" in test for test in kept) and any("test_serve.py" in test for test in kept)
    # Chromium comes with scripts/services: the browser's tests go, the dashboard's others stay
    assert not any("test_dashboard_first_triage" in test for test in kept)
    assert any("test_dashboard.py" in test for test in kept)
    # the stack walker comes with `make test` (cargo): the walks go, the symbol files' reading stays
    kept = collected("tests/unit/test_stackwalk.py", "-m", "not services")
    assert kept and not any("test_with_symbols_the_frames_name_the_programs_functions" in test for test in kept)


def test_marked_alone_they_are_what_make_test_adds():
    everything = set(collected("tests/contract"))
    on_services = set(collected("tests/contract", "-m", "services"))
    assert on_services and on_services < everything
    assert on_services == {test for test in everything if "services" in test.rsplit("[", 1)[-1]}
