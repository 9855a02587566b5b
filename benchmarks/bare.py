"""The ceiling of Python HTTP here, for comparison in the same run: an ASGI endpoint on the same
server stack as Blackbox's gateway (uvicorn, httptools, uvloop, N processes on one port) that only
reads the body, parses it as JSON and answers 202.

    python -m benchmarks.bare --port 8091 --workers 2
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import pydantic_core
import uvicorn

from benchmarks.legacy import read_body

Message = MutableMapping[str, Any]
_ANSWER = b'{"accepted":1}'
_HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(_ANSWER)).encode())]


async def app(scope: Message, receive: Callable[[], Awaitable[Message]],
              send: Callable[[Message], Awaitable[None]]) -> None:
    if scope["type"] != "http":
        return
    pydantic_core.from_json(await read_body(receive))  # the parser Blackbox's handlers use
    await send({"type": "http.response.start", "status": 202, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": _ANSWER})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    uvicorn.run("benchmarks.bare:app", host="127.0.0.1", port=args.port, workers=args.workers, http="httptools",
                loop="uvloop", log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
