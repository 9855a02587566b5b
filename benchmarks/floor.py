"""Serve's gateway with handlers that do nothing, for comparison in the same run: the door, the
routing, the API Gateway event, the handler thread and the answer that every request of `blackbox
serve` pays, with no handler's work after it (each route's function answers 202 at once). What
capture reaches in a run can be at most this; against the bare endpoint it tells how much of a
target the gateway alone leaves to the handlers.

    python -m benchmarks.floor --port 8092 --workers 2
"""

from __future__ import annotations

import argparse
from typing import Any

import uvicorn

from lambdas.functions import Handler
from local_runtime.gateway import Gateway, GuardedHttp

ANSWER = {"statusCode": 202, "headers": {"Content-Type": "application/json"}, "body": '{"accepted":1}'}


def nothing(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """A handler that reads nothing of its request and answers at once."""
    return ANSWER


class NothingGateway(Gateway):
    def _handler(self, function: str) -> Handler:
        return nothing


# uvicorn's workers import it by name, each its own (a pool of handler threads a process, as serve's)
app = NothingGateway()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    uvicorn.run("benchmarks.floor:app", host="127.0.0.1", port=args.port, workers=args.workers, http=GuardedHttp,
                log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
