"""A pytest run drops the Kafka topics and consumer groups its tests made (their namespaces begin
with the run's mark), and a run inside a test, which takes the outer run's mark, drops nothing the
outer run still uses. Left behind, a developer's broker grew by hundreds of topics a run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.services import RUN_ENV, on_kafka, run_prefix, settings

pytestmark = pytest.mark.services  # on the engines of scripts/services

ROOT = Path(__file__).resolve().parents[2]

# a run of its own: a topic and a group of its namespace, and where the namespace is told
MAKES = '''
import os
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.services import namespace, settings

def test_makes_a_topic_and_a_group():
    name = namespace()
    bootstrap = settings().kafka_bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(f"{name}.made", 1)])[f"{name}.made"].result(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{name}.group"})
    consumer.commit(offsets=[TopicPartition(f"{name}.made", 0, 0)], asynchronous=False)
    consumer.close()
    with open(os.environ["MADE_AT"], "w") as file:
        file.write(name)
'''


def _run(tmp_path: Path, env: dict[str, str]) -> str:
    (tmp_path / "test_makes.py").write_text(MAKES)
    told = tmp_path / "made"
    # the suite's hooks, as a plugin: tests/conftest.py reaches no file outside tests/
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
                          str(tmp_path / "test_makes.py"), "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml")],
                         cwd=ROOT, env=env | {"MADE_AT": str(told)}, capture_output=True, text=True, timeout=180,
                         check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    return told.read_text()


def _left(admin: AdminClient, name: str) -> list[str]:
    """The topics and consumer groups of the namespace `name` on the broker, once its metadata
    agrees with a deletion (it may lag it by a moment)."""
    deadline = time.monotonic() + 10
    while True:
        topics, groups = on_kafka(admin, name)
        if not topics + groups or time.monotonic() > deadline:
            return sorted(topics + groups)
        time.sleep(0.5)


def test_a_run_drops_what_it_made_and_one_inside_a_test_drops_nothing(tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": settings().kafka_bootstrap})
    alone = {k: v for k, v in os.environ.items() if k != RUN_ENV}
    made = _run(tmp_path, alone)
    assert not made.startswith(run_prefix())  # a mark of its own
    assert _left(admin, made) == []
    # a run inside this one keeps this run's mark, and leaves what it made to this run's end
    inside = _run(tmp_path, dict(os.environ))
    assert inside.startswith(run_prefix())
    topics, groups = on_kafka(admin, inside)
    assert (topics, groups) == ([f"{inside}.made"], [f"{inside}.group"])
