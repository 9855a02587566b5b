"""The Lambda functions by name, as deployed, with the routes, topics and ports of each: the local
runtime, `blackbox invoke` and the CDK stacks all read this table."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from adapters.factory import Port
from api.access import BOARD_READERS, READERS, SERVER, WRITERS, Role
from pipeline.topics import CONSUMED, CRASHES, DEADLETTER, MINIDUMPS, SCORES, SESSIONS

Handler = Callable[[dict[str, Any], Any], Any]
Credential = Literal["api-key", "sentry", "path"]

FUNCTIONS = {
    "capture": "lambdas.capture",
    "reporter": "lambdas.reporter",
    "crash-consumer": "lambdas.crash_consumer",
    "session-counter": "lambdas.session_counter",
    "leaderboards": "lambdas.leaderboards",
    "ranking-worker": "lambdas.ranking_worker",
    "purge": "lambdas.purge",
    "replay": "lambdas.replay",
    "projects": "lambdas.projects",
    "native": "lambdas.native",
    "symbols": "lambdas.symbols",
    "minidump-processor": "lambdas.minidump_processor",
    "issues": "lambdas.issues",
    # scheduled: sends the webhooks' due deliveries (in serve, a periodic thread)
    "webhooks": "lambdas.webhooks",
    # not a route's: API Gateway's authorizer for native's routes, in AWS only (stacks/api.py)
    "key-source": "lambdas.key_source",
}

@dataclass(frozen=True)
class ApiRoute:
    """A route of the REST API: its method and resource path, the function that answers it, and the
    roles whose keys may call it (None: anyone)."""

    method: str
    path: str
    function: str
    roles: frozenset[Role] | None
    # where the caller's key is: the x-api-key header, where a Sentry SDK puts it
    # (reporters.sentry.parse_auth), or the path's last part (CrashReportClient's URL can hold no other)
    credential: Credential = "api-key"
    # a route beside capture's whose retry an Idempotency-Key makes the same request
    keyed: bool = False

    @property
    def ingest(self) -> bool:
        """Capture's: called with an API key in AWS too (a usage plan), and idempotent by a header."""
        return self.function == "capture"

    @property
    def idempotent(self) -> bool:
        return self.ingest or self.keyed


# The REST API's routes (docs/api.md), with who may call each: API Gateway declares exactly these, and
# the local gateway matches and authorizes by the same, so an unknown route is a 404 in both. Each
# function's handler declares the same routes (checked by tests/unit/test_contract_drift.py).
API_ROUTES = (
    ApiRoute("POST", "/v1/crashes", "capture", WRITERS),
    ApiRoute("POST", "/v1/sessions", "capture", WRITERS),
    ApiRoute("POST", "/v1/scores", "capture", SERVER),
    ApiRoute("GET", "/v1/crashes", "reporter", READERS),
    ApiRoute("GET", "/v1/crashes/{reportId}", "reporter", READERS),
    ApiRoute("GET", "/v1/crashes/{reportId}/attachments/{name}", "reporter", READERS),
    ApiRoute("GET", "/v1/stats", "reporter", READERS),
    ApiRoute("GET", "/v1/crash-groups", "reporter", READERS),
    ApiRoute("GET", "/v1/crash-groups/{signature}", "issues", READERS),
    ApiRoute("PUT", "/v1/crash-groups/{signature}/state", "issues", SERVER),
    ApiRoute("POST", "/v1/crash-groups/{signature}/merge", "issues", SERVER),
    ApiRoute("GET", "/v1/crash-groups:rules", "issues", READERS),
    ApiRoute("PUT", "/v1/crash-groups:rules", "issues", SERVER),
    ApiRoute("POST", "/v1/crash-groups:reprocess", "issues", SERVER),
    ApiRoute("GET", "/v1/webhooks", "issues", SERVER),
    ApiRoute("PUT", "/v1/webhooks/{name}", "issues", SERVER),
    ApiRoute("DELETE", "/v1/webhooks/{name}", "issues", SERVER),
    ApiRoute("GET", "/v1/webhooks/{name}/deliveries", "issues", SERVER),
    ApiRoute("GET", "/v1/skus", "reporter", READERS),
    ApiRoute("GET", "/v1/alerts", "reporter", READERS),
    ApiRoute("GET", "/v1/alerts/history", "issues", READERS),
    ApiRoute("GET", "/v1/releases", "reporter", READERS),
    ApiRoute("GET", "/v1/releases/{build}", "reporter", READERS),
    ApiRoute("GET", "/v1/health", "reporter", None),
    ApiRoute("GET", "/v1/leaderboards", "leaderboards", BOARD_READERS),
    ApiRoute("PUT", "/v1/leaderboards/{board}", "leaderboards", SERVER),
    ApiRoute("GET", "/v1/leaderboards/{board}", "leaderboards", BOARD_READERS),
    ApiRoute("DELETE", "/v1/leaderboards/{board}", "leaderboards", SERVER),
    ApiRoute("GET", "/v1/leaderboards/{board}/players/{playerId}", "leaderboards", BOARD_READERS),
    ApiRoute("DELETE", "/v1/leaderboards/{board}/players/{playerId}", "leaderboards", SERVER, keyed=True),
    ApiRoute("GET", "/v1/leaderboards/{board}/seasons", "leaderboards", BOARD_READERS),
    ApiRoute("POST", "/v1/leaderboards/{board}/players:ranks", "leaderboards", BOARD_READERS),
    ApiRoute("POST", "/v1/leaderboards/{board}/attempts", "leaderboards", SERVER, keyed=True),
    ApiRoute("GET", "/v1/leaderboards/{board}/top", "leaderboards", BOARD_READERS),
    ApiRoute("GET", "/v1/leaderboards/{board}/around/{playerId}", "leaderboards", BOARD_READERS),
    ApiRoute("GET", "/v1/leaderboards/{board}/rank", "leaderboards", BOARD_READERS),
    ApiRoute("GET", "/v1/bans", "leaderboards", SERVER),
    ApiRoute("GET", "/v1/bans/{playerId}", "leaderboards", SERVER),
    ApiRoute("PUT", "/v1/bans/{playerId}", "leaderboards", SERVER),
    ApiRoute("DELETE", "/v1/bans/{playerId}", "leaderboards", SERVER),
    ApiRoute("GET", "/v1/projects", "projects", READERS),
    ApiRoute("PUT", "/v1/projects/{projectId}", "projects", SERVER),
    ApiRoute("GET", "/v1/projects/{projectId}", "projects", READERS),
    ApiRoute("POST", "/api/{projectId}/envelope/", "native", WRITERS, "sentry"),
    ApiRoute("POST", "/api/{projectId}/store/", "native", WRITERS, "sentry"),
    ApiRoute("POST", "/api/{projectId}/minidump/", "native", WRITERS, "sentry"),
    ApiRoute("POST", "/submit", "native", WRITERS, "sentry"),
    ApiRoute("POST", "/api/{projectId}/unreal/{key}/", "native", WRITERS, "path"),
    ApiRoute("GET", "/v1/symbols", "symbols", READERS),
    ApiRoute("POST", "/v1/symbols", "symbols", SERVER),
    ApiRoute("DELETE", "/v1/symbols/{debugFile}/{debugId}", "symbols", SERVER),
)

# consumer function → the topic its event source mapping reads
CONSUMERS = {"crash-consumer": CRASHES, "session-counter": SESSIONS, "ranking-worker": SCORES,
             "minidump-processor": MINIDUMPS}
# consumer → the records of a batch at most, as the deployment's event source mappings hand them
# (stacks/config.py's defaults) and serve's pollers too: crash reports are up to 1 MiB each and a
# walk up to seconds; the ranking worker's aggregation gains with every update a batch holds
BATCH_RECORDS = {"crash-consumer": 500, "session-counter": 5000, "ranking-worker": 10_000, "minidump-processor": 5}

# function → the ports its handler reaches (the log of a consumer: its dead letters). A function
# builds only these (adapters.factory builds a port on first use), and in AWS is told where these
# stores are and granted these alone (stacks/access.py): capture cannot read a database secret.
FUNCTION_PORTS: dict[str, frozenset[Port]] = {
    "capture": frozenset({"log", "spill"}),
    # the log: /v1/health pings it; issues: a sku's grouping rules, which make its groups' top frames
    "reporter": frozenset({"index", "documents", "counters", "log", "issues"}),
    # issues: a new report makes or moves its group's issue (crashes.persistence)
    "crash-consumer": frozenset({"documents", "index", "log", "issues"}),
    "session-counter": frozenset({"counters", "log"}),
    # the log (or spill): a record's deletion goes to the board's worker, in order with its updates
    "leaderboards": frozenset({"ranking", "log", "spill"}),
    "ranking-worker": frozenset({"ranking", "log"}),
    "purge": frozenset({"spill", "documents", "index", "counters", "ranking", "issues"}),  # MSK expires the log itself
    "replay": frozenset({"log", "spill"}),  # and, in AWS, the failed-batch bucket (pipeline.replay)
    "projects": frozenset({"projects"}),
    # capture's, and the projects read (cached: reporters.projects.Skus)
    "native": frozenset({"log", "spill", "projects"}),
    "key-source": frozenset(),
    # an upload asks for the reports that lacked the file to be walked again (the log, or spill)
    "symbols": frozenset({"symbols", "log", "spill"}),
    # issues: the skus' groupings, and the groups a reprocessing (its pages come on its topic) moves to
    "minidump-processor": frozenset({"documents", "index", "symbols", "log", "issues"}),
    # the log (or spill): a merge or a reprocessing asks the minidump processor to group reports again
    "issues": frozenset({"issues", "log", "spill"}),
    # and the ends of seasons, velocity and crash-free drops (the release counts), told
    "webhooks": frozenset({"issues", "ranking", "counters"}),
}


@dataclass(frozen=True)
class TopicAccess:
    """The topics a function of the log port publishes to and reads (by its event source mapping
    or by offset); in AWS its role may touch these alone (stacks/access.py)."""

    writes: frozenset[str] = frozenset()
    reads: frozenset[str] = frozenset()


CAPTURED = frozenset({CRASHES, SESSIONS, SCORES})
FUNCTION_TOPICS: dict[str, TopicAccess] = {
    "capture": TopicAccess(writes=CAPTURED),
    "native": TopicAccess(writes=frozenset({CRASHES, SESSIONS})),
    "leaderboards": TopicAccess(writes=frozenset({SCORES})),
    # /v1/health lists the cluster's topics, which takes a connection and no topic
    "reporter": TopicAccess(),
    # a consumer reads its topic (and a record at a stored offset) and sets bad records aside
    **{name: TopicAccess(writes=frozenset({DEADLETTER}), reads=frozenset({topic}))
       for name, topic in CONSUMERS.items()},
    # it asks for the minidumps of what it persisted to be walked
    "crash-consumer": TopicAccess(writes=frozenset({DEADLETTER, MINIDUMPS}), reads=frozenset({CRASHES})),
    # and it, for the reports that awaited a symbol file, in pages
    "minidump-processor": TopicAccess(writes=frozenset({DEADLETTER, MINIDUMPS}), reads=frozenset({MINIDUMPS})),
    "symbols": TopicAccess(writes=frozenset({MINIDUMPS})),
    "issues": TopicAccess(writes=frozenset({MINIDUMPS})),
    # a failed batch goes back to its topic, read back by offset when its object lacks the records
    "replay": TopicAccess(writes=frozenset(CONSUMED), reads=frozenset(CONSUMED)),
}


def load_handler(name: str) -> Handler:
    if name not in FUNCTIONS:
        raise KeyError(f"unknown function {name!r}; known: {', '.join(FUNCTIONS)}")
    handler: Handler = importlib.import_module(FUNCTIONS[name]).handler
    return handler
