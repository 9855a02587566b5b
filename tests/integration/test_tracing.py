"""Every Lambda function is traced in X-Ray through Powertools' tracer, as the stacks' active
tracing expects. Run in a child process that Lambda's environment makes the tracer switch on in
(it decides once, at import), with the X-Ray SDK's emitter swapped for one that keeps segments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lambdas.functions import FUNCTIONS

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import json, sys
from aws_xray_sdk.core import xray_recorder
from lambdas.functions import load_handler
from local_runtime.context import LocalContext
from tests.conftest import load_event

class Keep:  # the emitter's interface, without a daemon to send to
    ip, port = "127.0.0.1", 2000
    def __init__(self): self.entities = []
    def send_entity(self, entity): self.entities.append(entity.to_dict())
    def set_daemon_address(self, address): pass

keep = Keep()
xray_recorder.configure(emitter=keep)
traced = {}
for function, event in json.loads(sys.argv[1]).items():
    keep.entities.clear()
    load_handler(function)(load_event(event), LocalContext(function))
    traced[function] = [{"annotations": e.get("annotations", {}), "metadata": e.get("metadata", {})}
                        for e in keep.entities if e.get("name") == "## handler"]
print(json.dumps(traced))
"""
# a sample event for each function (events/), what it is invoked with in the child
SAMPLES = {
    "capture": "capture-crash.json", "reporter": "reporter-list-crashes.json", "crash-consumer": "crash-consumer.json",
    "session-counter": "session-counter.json", "leaderboards": "leaderboards-top.json",
    "ranking-worker": "ranking-worker.json", "purge": "purge-scheduled.json", "replay": "replay-scheduled.json",
    "projects": "projects-put.json", "native": "native-envelope.json", "key-source": "key-source.json",
    "symbols": "symbols-post.json", "minidump-processor": "minidump-processor.json",
    "issues": "issues-put-webhook.json", "webhooks": "webhooks-scheduled.json",
}


def test_every_function_is_traced_without_its_answer_in_the_trace(tmp_path):
    assert set(SAMPLES) == set(FUNCTIONS)
    env = {**os.environ, "AWS_LAMBDA_FUNCTION_NAME": "blackbox-test", "LAMBDA_TASK_ROOT": str(tmp_path),
           "_X_AMZN_TRACE_ID": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
           "BLACKBOX_DATA_DIR": str(tmp_path / "data"), "POWERTOOLS_METRICS_DISABLED": "true"}
    env.pop("POWERTOOLS_TRACE_DISABLED", None)
    child = subprocess.run([sys.executable, "-c", CHILD, json.dumps(SAMPLES)], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120, check=True)
    traced = json.loads(child.stdout.splitlines()[-1])
    for function in FUNCTIONS:
        [segment] = traced[function]  # one handler segment per invocation
        assert segment["annotations"]["Service"] == "blackbox"
        # a page of reports would not fit a segment: the handler's answer stays out
        assert not any("response" in key for key in json.dumps(segment["metadata"]).split('"'))


def test_outside_lambda_no_process_loads_the_x_ray_sdk(tmp_path):
    """Switched off, Powertools' tracer still loads the X-Ray SDK and a botocore session when it is
    built: 38 MB in each process of a serve (its supervisor included), which the 30-minute soak
    measured as the serve's level growing from 334 to 474 MB. Nor does importing them load the
    migrations' statement splitter, which only `migrate` uses (1.2 MB)."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("AWS_LAMBDA_FUNCTION_NAME", "LAMBDA_TASK_ROOT", "POWERTOOLS_TRACE_DISABLED")}
    child = subprocess.run([sys.executable, "-c", """
import sys
import local_runtime.server
from lambdas.functions import FUNCTIONS, load_handler
for function in FUNCTIONS:
    load_handler(function)
import adapters.embedded.sqlite, adapters.mysql.database  # what the workers build their ports with
print(sorted(m for m in sys.modules if m.split(".")[0] in ("aws_xray_sdk", "sqlparse")))
"""], cwd=ROOT, env=env | {"BLACKBOX_DATA_DIR": str(tmp_path)}, capture_output=True, text=True, timeout=120,
                           check=True)
    assert child.stdout.splitlines()[-1] == "[]"
