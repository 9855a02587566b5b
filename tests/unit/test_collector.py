from __future__ import annotations

import subprocess
import sys

import pytest

from lambdas.functions import CONSUMERS, FUNCTIONS
from pipeline.collector import YOUNG_OBJECTS


def _young_threshold_after_importing(*modules: str) -> int:
    # a process of its own: the setting is process-wide, as a Lambda environment's is
    imported = "".join(f", {module}" for module in modules)
    found = subprocess.run([sys.executable, "-c", f"import gc{imported}; print(gc.get_threshold()[0])"],
                           capture_output=True, text=True, check=True)
    return int(found.stdout)


@pytest.mark.parametrize("function", sorted(CONSUMERS))
def test_a_consumer_function_collects_young_objects_less_often_from_its_first_batch(function: str) -> None:
    assert _young_threshold_after_importing(FUNCTIONS[function]) == YOUNG_OBJECTS


def test_the_api_and_the_other_functions_keep_the_collector_as_python_sets_it() -> None:
    # the local gateway too, which loads the API's functions in a serve's API workers
    others = [module for function, module in FUNCTIONS.items() if function not in CONSUMERS]
    pythons = _young_threshold_after_importing()
    assert pythons != YOUNG_OBJECTS
    assert _young_threshold_after_importing(*others, "local_runtime.gateway") == pythons
