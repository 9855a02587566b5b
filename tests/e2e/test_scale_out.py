"""Many processes, one system (docs/scale-out.md). On services, two `serve --role consumers` are
members of each consumer function's group beside a `serve --role api`; crashes, sessions and
scores stream in while a consumer worker is killed with SIGKILL (its supervisor starts it again)
and then a whole consumers serve is (and is started again by hand): every report is queryable
once, counters and leaderboards equal the brute-force totals. API workers accept on one port.
And the supervisor: a worker that keeps dying stops serve, and a killed supervisor takes its
workers along."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from confluent_kafka.admin import AdminClient

from adapters.kafka.log import SESSION_TIMEOUT_MS
from local_runtime.process import Serve
from pipeline.topics import SESSIONS
from tests.e2e.test_faults import XP, Deployment, Ledger, burst, verify
from tests.services import drop_database, mysql_url, namespace, settings

pytestmark = pytest.mark.services  # on the engines of scripts/services


@pytest.fixture(scope="module")
def services_env() -> Iterator[dict[str, str]]:
    """One namespace in the engines that every serve of a test shares: one system."""
    name = namespace()
    yield {"BLACKBOX_MYSQL_URL": mysql_url(name), "BLACKBOX_KAFKA_TOPIC_PREFIX": f"{name}.",
           "BLACKBOX_COUCHBASE_KEY_PREFIX": f"{name}:"}
    drop_database(name)


def group_members(prefix: str, function: str) -> dict[str, list[int]]:
    """The members of a consumer function's group and the partitions each holds."""
    admin = AdminClient({"bootstrap.servers": settings().kafka_bootstrap})
    group = f"{prefix}blackbox-{function}"
    [description] = [f.result() for f in admin.describe_consumer_groups([group], request_timeout=10).values()]
    return {m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions) for m in description.members}


def partitions(prefix: str, topic: str) -> list[int]:
    admin = AdminClient({"bootstrap.servers": settings().kafka_bootstrap})
    return sorted(admin.list_topics(prefix + topic, timeout=10).topics[prefix + topic].partitions)


def wait_until(check: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_two_consumer_serves_of_one_group_lose_nothing_to_sigkill(tmp_path: Path, services_env: dict[str, str]):
    api = Serve(tmp_path / "api", tmp_path / "api.log", "services", services_env, role="api", workers=1)
    consumers = [Serve(tmp_path / f"c{i}", tmp_path / f"c{i}.log", "services", services_env, role="consumers",
                       workers=1) for i in range(2)]
    for serve in [api, *consumers]:
        serve.start()
    try:
        prefix = services_env["BLACKBOX_KAFKA_TOPIC_PREFIX"]
        deployment, ledger = Deployment(api, prefix, consumers), Ledger()
        with httpx.Client(base_url=api.url) as client:
            assert client.put(f"/v1/leaderboards/{XP}", json={"order": "desc", "operator": "incr"}).status_code == 201
        burst(deployment, ledger, "calm", None, n=60)
        verify(deployment, ledger)
        # one group: once it settles, each of the two holds some of the topic's partitions
        wait_until(lambda: len(held := group_members(prefix, "session-counter")) == 2 and all(held.values()),
                   "the two did not settle into one group")
        held = group_members(prefix, "session-counter")
        assert sorted(p for partitions_held in held.values() for p in partitions_held) == partitions(prefix, SESSIONS)

        [worker] = consumers[0].pids("consumers")

        killed = []

        def kill_worker() -> None:
            psutil.Process(worker).send_signal(signal.SIGKILL)
            killed.append(time.time())
            # found from outside: started again at once, the worker joined its groups while they still
            # counted it, and every member of every group stopped until its session timed out; started
            # once they dropped it, the other serve holds all of its group's partitions meanwhile
            every = partitions(prefix, SESSIONS)
            wait_until(lambda: list(group_members(prefix, "session-counter").values()) == [every],
                       "the other serve did not hold every partition before the killed worker came back")

        burst(deployment, ledger, "worker", kill_worker)
        verify(deployment, ledger)
        # its supervisor starts it again once its groups dropped it, which a short burst may not wait for
        wait_until(lambda: consumers[0].pids("consumers") != [worker], "the killed worker was not started again")
        [again] = consumers[0].pids("consumers")
        assert psutil.Process(again).create_time() >= killed[0] + SESSION_TIMEOUT_MS / 1000
        told = consumers[0].log_path.read_text()
        assert f"consumers worker 0 (pid {worker}) was killed by SIGKILL; starting it again in " in told
        assert f"started consumers worker 0 again as pid {again}, in place of pid {worker}" in told

        [orphan] = consumers[1].pids("consumers")

        def kill_serve_and_start_it_again() -> None:
            consumers[1].stop(signal.SIGKILL)
            psutil.Process(orphan).wait(timeout=5)  # its worker went with it
            consumers[1].start()

        burst(deployment, ledger, "serve", kill_serve_and_start_it_again)
        verify(deployment, ledger)
    finally:
        for serve in [api, *consumers]:
            if serve.process is not None:
                assert serve.stop() == 0


def test_api_workers_accept_on_one_port(tmp_path: Path, services_env: dict[str, str]):
    api = Serve(tmp_path / "data", tmp_path / "serve.log", "services", services_env, role="api", workers=2)
    api.start()
    try:
        workers = api.pids("api")
        assert len(set(workers)) == 2
        clients = [httpx.Client(base_url=api.url) for _ in range(32)]  # a connection each, kept open
        try:
            assert all(client.get("/v1/health").status_code == 200 for client in clients)
            holders = {pid for pid in workers for c in psutil.Process(pid).net_connections("tcp")
                       if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == api.port}
        finally:
            for client in clients:
                client.close()
        assert holders == set(workers)
    finally:
        assert api.stop() == 0
    # it consumes nothing, so it says nothing of consumed batches (found from outside)
    assert "Blackbox stopped\n" in api.log_path.read_text()


def test_the_consumers_yield_the_cpu_to_the_api(tmp_path: Path):
    serve = Serve(tmp_path / "data", tmp_path / "serve.log", workers=1)
    serve.start()
    try:
        [api], [consumers] = serve.pids("api"), serve.pids("consumers")
        # serve is up once its API answers: the consumers may still be starting
        wait_until(lambda: psutil.Process(consumers).nice() != psutil.Process().nice(), "the consumers' niceness")
        assert psutil.Process(consumers).nice() > psutil.Process(api).nice() == psutil.Process().nice()
    finally:
        assert serve.stop() == 0


def test_a_worker_that_keeps_dying_stops_serve(tmp_path: Path):
    serve = Serve(tmp_path / "data", tmp_path / "serve.log", workers=1)
    serve.start()
    process = serve.process
    assert process is not None
    for _ in range(3):
        [worker] = serve.pids("consumers")
        psutil.Process(worker).send_signal(signal.SIGKILL)
        wait_until(lambda: serve.pids("consumers") != [worker] or process.poll() is not None,  # noqa: B023
                   "the supervisor did not notice")
    assert process.wait(timeout=30) == 2
    assert "consumers worker 0 died 3 times within 10 s of starting (the last was killed by SIGKILL), so serve " \
           "stopped" in serve.log_path.read_text()
    assert not any(psutil.pid_exists(pid) for pid in serve.pids("api"))  # and stopped the rest


def dead(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_killed_supervisor_takes_its_workers_along(tmp_path: Path):
    serve = Serve(tmp_path / "data", tmp_path / "serve.log", workers=2)
    serve.start()
    workers = [psutil.Process(pid) for pid in serve.pids("api") + serve.pids("consumers")]
    assert len(workers) == 3  # on embedded the consumers are one process whatever --workers
    serve.stop(signal.SIGKILL)
    _, alive = psutil.wait_procs(workers, timeout=2)
    # a zombie is dead, only not reaped yet: where PID 1 is no init, orphans may stay so
    assert not [p for p in alive if not dead(p)]
    serve.start()  # the port and the data directory are free again
    assert serve.stop() == 0

