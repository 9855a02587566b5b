"""Every Lambda function publishes Powertools metrics: a ColdStart count by function on its first
call, in CloudWatch's embedded metric format, and nothing on later calls that counted nothing. Run
in a child process, as the handlers decide at import whether metrics are on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lambdas.functions import FUNCTIONS
from tests.integration.test_tracing import SAMPLES

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import json, sys
from aws_lambda_powertools.metrics.provider.cold_start import reset_cold_start_flag
from lambdas.functions import load_handler
from local_runtime.context import LocalContext
from tests.conftest import load_event

for function, event in json.loads(sys.argv[1]).items():
    reset_cold_start_flag()  # each function is a container of its own in Lambda
    for call in ("first", "second"):
        print(json.dumps({"function": function, "call": call}), flush=True)
        load_handler(function)(load_event(event), LocalContext(function))
"""


def test_every_function_counts_its_cold_start(tmp_path):
    env = {**os.environ, "BLACKBOX_DATA_DIR": str(tmp_path / "data"), "POWERTOOLS_METRICS_DISABLED": "false",
           "POWERTOOLS_LOG_LEVEL": "ERROR"}
    child = subprocess.run([sys.executable, "-c", CHILD, json.dumps(SAMPLES)], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120, check=True)
    cold_starts: dict[tuple[str, str], list[str]] = {}
    call: tuple[str, str] = ("", "")
    for line in child.stdout.splitlines():
        record = json.loads(line)
        if "call" in record:
            call = (record["function"], record["call"])
        elif "ColdStart" in record:
            metric = record["_aws"]["CloudWatchMetrics"][0]
            assert metric["Namespace"] == "Blackbox" and ["function_name", "service"] in metric["Dimensions"]
            cold_starts.setdefault(call, []).append(record["function_name"])
    assert cold_starts == {(function, "first"): [function] for function in FUNCTIONS}
