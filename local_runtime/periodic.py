"""What a schedule runs in AWS, run by serve on a timer: the spill replay (so data held back by an
outage arrives without anyone running `blackbox replay`), the retention purge, the webhooks'
delivery and the alerts it sends (seasons' ends, velocity, crash-free drops)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from adapters.factory import Adapters
from crashes.alerts import tell_alerts
from local_runtime.poller import READERS
from pipeline.topics import replay_spilled
from ports.telemetry import logger
from ports.timeutil import now_ms
from ranking.season_ends import tell_season_ends
from ranking.tree import DEFAULT_TREE
from retention.purge import purge
from webhooks.delivery import deliver_due

SPILL_REPLAY_INTERVAL_S = 2.0
PURGE_INTERVAL_S = 3600.0
# an alert reaches its webhooks within about this (the AWS schedule's is a minute)
WEBHOOK_INTERVAL_S = 1.0


class Periodic(threading.Thread):
    """Runs `job` every `interval_s` until `stop` is set, the first time right away; a failure is
    logged and the job tried again at its next turn."""

    def __init__(self, name: str, job: Callable[[], object], stop: threading.Event, interval_s: float) -> None:
        super().__init__(name=name, daemon=True)
        self._job = job
        self._stop_event = stop
        self._interval = interval_s

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self._job()
            except Exception as exc:  # a store is away: what is left waits for the next turn
                logger.warning(f"{self.name} failed; trying again", extra={"error": repr(exc)})
            self._stop_event.wait(self._interval)


def spill_replayer(adapters: Adapters, stop: threading.Event,
                   interval_s: float = SPILL_REPLAY_INTERVAL_S) -> Periodic:
    def replay() -> None:
        if replayed := replay_spilled(adapters.log, adapters.spill):
            logger.info("replayed spilled events", extra={"events": replayed})

    return Periodic("spill-replayer", replay, stop, interval_s)


def purger(adapters: Adapters, stop: threading.Event, interval_s: float = PURGE_INTERVAL_S) -> Periodic:
    return Periodic("purge", lambda: purge(adapters, now_ms(), readers=READERS), stop, interval_s)


def webhook_sender(adapters: Adapters, stop: threading.Event, interval_s: float = WEBHOOK_INTERVAL_S) -> Periodic:
    # a stop waits for the deliveries under way (each within the policy's timeout), claims no more
    return Periodic("webhooks", lambda: deliver_due(adapters.issues, adapters.settings.webhooks, stopping=stop.is_set),
                    stop, interval_s)


def season_teller(adapters: Adapters, stop: threading.Event) -> Periodic:
    policy = adapters.settings.season_end
    return Periodic("season-ends", lambda: tell_season_ends(adapters.ranking, adapters.issues, DEFAULT_TREE, policy,
                                                            now_ms()), stop, policy.look_every_s)


def alert_teller(adapters: Adapters, stop: threading.Event) -> Periodic:
    policy = adapters.settings.alerts
    return Periodic("alerts", lambda: tell_alerts(adapters.counters, adapters.issues, policy, now_ms()), stop,
                    policy.look_every_s)
