"""A local API Gateway: an ASGI app that turns each HTTP request into the REST API's Lambda proxy
event, calls the function that owns the route, and turns its answer back into HTTP."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qsl

import pybase64

from core.access import API_KEY_HEADER, ApiKeys
from core.errors import BlackboxError, NotFound, PayloadTooLarge
from core.timeutil import now_ms
from dashboard import asset
from local_runtime.functions import API_ROUTES, Handler, LocalContext, load_handler

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

# API Gateway's own payload limit; the handlers enforce the contract's smaller ones
GATEWAY_MAX_BODY = 10 * 1024 * 1024

_ROUTES = [
    (method, re.compile("^" + re.sub(r"\{[^/]+\}", "[^/]+", path) + "$"), path, function)
    for method, path, function in API_ROUTES
]


def route(method: str, path: str) -> tuple[str, str] | None:
    """The function that owns the request and the route template it matched."""
    return next(((f, t) for m, pattern, t, f in _ROUTES if m == method and pattern.match(path)), None)


def proxy_event(scope: Scope, body: bytes) -> dict[str, Any]:
    headers: dict[str, list[str]] = {}
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").lower()
        if name != API_KEY_HEADER:  # checked by the gateway; no handler needs it, and none can leak it
            headers.setdefault(name, []).append(raw_value.decode("latin-1"))
    query: dict[str, list[str]] = {}
    for name, value in parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True):
        query.setdefault(name, []).append(value)
    try:
        text, is_base64 = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, is_base64 = pybase64.b64encode(body).decode(), True
    client = scope.get("client") or ("127.0.0.1", 0)
    return {
        "resource": "/{proxy+}",
        "path": scope["path"],
        "httpMethod": scope["method"],
        "headers": {k: v[-1] for k, v in headers.items()},
        "multiValueHeaders": headers,
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": query or None,
        "pathParameters": {"proxy": scope["path"].lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/{proxy+}",
            "httpMethod": scope["method"],
            "path": scope["path"],
            "stage": "local",
            "requestId": str(uuid.uuid4()),
            "requestTimeEpoch": now_ms(),
            "protocol": scope.get("http_version", "1.1"),
            "identity": {"sourceIp": client[0]},
        },
        "body": text if body else None,
        "isBase64Encoded": is_base64,
    }


class Gateway:
    def __init__(self, keys: ApiKeys | None = None, workers: int = 32) -> None:
        self._keys = keys or ApiKeys()
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lambda")
        self._handlers: dict[str, Handler] = {}

    def _handler(self, function: str) -> Handler:
        if function not in self._handlers:
            self._handlers[function] = load_handler(function)
        return self._handlers[function]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        matched = route(scope["method"], scope["path"])
        static = asset(scope["path"]) if matched is None and scope["method"] == "GET" else None
        if static is not None:
            data, content_type = static
            await self._respond(send, {
                "statusCode": 200,
                "headers": {"Content-Type": content_type, "Cache-Control": "no-cache"},
                "body": pybase64.b64encode(data).decode(),
                "isBase64Encoded": True,
            })
            return
        if matched is None:
            await self._error(send, NotFound(f"no route for {scope['method']} {scope['path']}"))
            return
        function, template = matched
        presented = next((v.decode("latin-1") for k, v in scope["headers"] if k.lower() == API_KEY_HEADER.encode()),
                         None)
        try:
            self._keys.authorize(presented, scope["method"], template)
        except BlackboxError as error:
            await self._error(send, error)
            return
        body = await self._read_body(receive)
        if body is None:
            await self._error(send, PayloadTooLarge(f"body is over the gateway's {GATEWAY_MAX_BODY} bytes"))
            return
        event = proxy_event(scope, body)
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(
            self._executor, self._handler(function), event, LocalContext(function_name=function)
        )
        await self._respond(send, result)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self._executor.shutdown(wait=True)
                await send({"type": "lifespan.shutdown.complete"})
                return

    @staticmethod
    async def _read_body(receive: Receive) -> bytes | None:
        """The whole body, or None past the limit. An oversize body is still read to its end (and
        dropped) so that the client, still sending, gets to read the 413."""
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size <= GATEWAY_MAX_BODY:
                chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks) if size <= GATEWAY_MAX_BODY else None

    @staticmethod
    async def _error(send: Send, error: BlackboxError) -> None:
        await Gateway._respond(send, {
            "statusCode": error.status,
            "headers": {"Content-Type": "application/json"},
            "body": json.dumps(error.body()),
        })

    @staticmethod
    async def _respond(send: Send, result: dict[str, Any]) -> None:
        body = result.get("body") or ""
        payload = pybase64.b64decode(body) if result.get("isBase64Encoded") else body.encode()
        headers: dict[str, list[str]] = {k.lower(): list(v) for k, v in (result.get("multiValueHeaders") or {}).items()}
        for name, value in (result.get("headers") or {}).items():
            headers[name.lower()] = [value]
        headers["content-length"] = [str(len(payload))]
        await send({
            "type": "http.response.start",
            "status": result["statusCode"],
            "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, vs in headers.items() for v in vs],
        })
        await send({"type": "http.response.body", "body": payload})
