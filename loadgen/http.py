"""The load generator's HTTP/1.1 client: keep-alive connections, each an asyncio protocol that
writes a request's bytes and parses the answer with httptools (uvicorn's parser), on uvloop.

aiohttp spent some 400 µs of the client's CPU on each request: on the 2 cores the client shares
with the server, the open loop fell behind past 2,000 requests/s, and every latency it measured,
a 503's too, was then mostly the client's own lag (against a server that answers 503 at once it
measured a p95 of 4.4 s). Here a request costs its bytes and a parse."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from typing import NamedTuple, cast
from urllib.parse import urlsplit

import httptools


class Answer(NamedTuple):
    status: int
    headers: Mapping[str, str]
    """By lower-case name."""
    body: bytes


class Disconnected(ConnectionError):
    """The server closed the connection before it answered."""


class BadAnswer(ConnectionError):
    """What came back is not an HTTP/1.1 answer."""


class _Connection(asyncio.Protocol):
    """One connection, one request at a time on it."""

    def __init__(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[Answer] | None = None
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self.usable = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is one, but not by class

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(BadAnswer(str(exc)))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.usable = False
        self._fail(Disconnected("the server closed the connection before it answered"))

    # httptools' callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        answer = Answer(self._parser.get_status_code(), self._headers, b"".join(self._body))
        self._headers, self._body = {}, []
        if not self._parser.should_keep_alive():
            self.close()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(answer)

    def _fail(self, error: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)

    async def exchange(self, request: bytes) -> Answer:
        assert self._transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._transport.write(request)
        return await self._waiter

    def close(self) -> None:
        self.usable = False
        if self._transport is not None:
            self._transport.close()


class Client:
    """POSTs to one server over at most `limit` connections, each opened when none is idle; a
    request that finds all `limit` busy waits for one. A connection is reused once its answer is
    read, unless the server asked to close it (or the request failed or timed out on it)."""

    def __init__(self, url: str, headers: Mapping[str, str], *, limit: int, timeout_s: float) -> None:
        parts = urlsplit(url)
        self._tls = ssl.create_default_context() if parts.scheme == "https" else None
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or (443 if self._tls else 80)
        self._prefix = parts.path.rstrip("/")
        host = parts.netloc.rpartition("@")[2]
        self._head = "".join(f"{name}: {value}\r\n" for name, value in {"Host": host, **headers}.items())
        self._slots = asyncio.Semaphore(limit)
        self._idle: list[_Connection] = []
        self._timeout_s = timeout_s

    async def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> Answer:
        extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        request = (f"POST {self._prefix}{path} HTTP/1.1\r\n{self._head}{extra}"
                   f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1") + body
        async with self._slots:
            connection = self._take_idle()
            try:
                async with asyncio.timeout(self._timeout_s):
                    if connection is None:
                        connection = await self._open()
                    answer = await connection.exchange(request)
            except BaseException:
                if connection is not None:
                    connection.close()
                raise
            if connection.usable:
                self._idle.append(connection)
            return answer

    def _take_idle(self) -> _Connection | None:
        while self._idle:
            connection = self._idle.pop()
            if connection.usable:
                return connection
        return None

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(_Connection, self._host, self._port, ssl=self._tls)
        return connection

    def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()
