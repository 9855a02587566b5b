"""A local API Gateway: an ASGI app that turns each HTTP request into the REST API's Lambda proxy
event, calls the function that owns the route, and turns its answer back into HTTP. Like API
Gateway it keeps the door: a body within the contract's limit, a request within time limits, no
more requests in the handlers than it can soon answer, and with no API keys configured, only
requests addressed to a loopback name."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import json
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Any, NoReturn
from urllib.parse import parse_qsl, quote, unquote

import pybase64
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from api.access import API_KEY_HEADER, ApiKeys
from api.requests import MAX_IN_FLIGHT
from api.resolver import EVERY_ANSWER
from dashboard import HEADERS as DASHBOARD_HEADERS
from dashboard import asset
from lambdas.functions import API_ROUTES, ApiRoute, Handler, load_handler
from local_runtime.context import LocalContext
from ports.errors import (
    BlackboxError,
    Forbidden,
    HeadersTooLarge,
    MalformedRequest,
    NotFound,
    PayloadTooLarge,
    RequestTimeout,
    Unauthorized,
    Unavailable,
    UnsupportedCoding,
)
from ports.limits import MAX_BODY_BYTES
from ports.timeutil import now_ms
from reporters.sentry import AUTH_HEADERS as SENTRY_AUTH_HEADERS
from reporters.sentry import check_protocol, find_auth

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

# a request's line and headers, from its first byte (or the connection's opening) to their end
HEADER_TIMEOUT = 10.0
MAX_HEAD_BYTES = 64 * 1024
# a whole body: the contract's 1 MiB at 35 KB/s
BODY_TIMEOUT = 30.0
# what a body may take on the wire, its chunks' framing too: llhttp bounds no chunk's extension, and
# a sender's chunks of a kilobyte or more frame 1 MiB in well under this
MAX_FRAMED_BODY_BYTES = 2 * MAX_BODY_BYTES
# a connection closed while its client may still send reads away what comes for this long, or this
# much, after its answer and a half-close (RFC 9112 §9.6)
LINGER_S = 2.0
LINGER_BYTES = 4 * MAX_BODY_BYTES
# a shed request's client may try again this soon: the handlers drain a full bound well within it
RETRY_AFTER_S = 1
# the bytes of bodies still arriving one API process holds before it answers 503: the bound on
# what they take, where a count of them would let connections that send a head and wait take every
# place (a slowloris); with MAX_IN_FLIGHT bodies of 1 MiB in the handlers, a process's bodies stay
# within 640 MiB
MAX_ARRIVING_BYTES = 128 << 20
HEALTH_PATH = "/v1/health"
# the places health has past the bound: a probe gets one however busy the process, and a flood of
# them (open to anyone) is bounded too
HEALTH_ROOM = 8
# CoDel for the wait for a handler thread: a queue stands once even the shortest wait of an
# interval exceeds the target. Ten times the figures of Facebook's thread pools (5 ms, 100 ms):
# a burst of a few hundred requests, which drains within a second or two here, is served whole
QUEUE_TARGET_S = 0.05
QUEUE_INTERVAL_S = 1.0
# glibc's mallopt parameters (malloc.h), and the size from which a buffer gets its own mapping
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
LARGE_BUFFER_BYTES = 128 * 1024
# in open mode (no keys) the names a request may be addressed to: a page of another site that got
# its name to resolve to 127.0.0.1 (DNS rebinding) still sends its own name
_LOOPBACK_HOST = re.compile(r"(localhost|127\.0\.0\.1|\[::1\])(:[0-9]{1,5})?", re.IGNORECASE)
_LOOPBACK_ORIGIN = re.compile(rf"https?://{_LOOPBACK_HOST.pattern}", re.IGNORECASE)


class _Disconnected(Exception):
    """The client went away before its body ended: there is no one to answer."""


class Overloaded(Unavailable):
    """The bound on in-flight requests is reached: answered before the handler runs, so nothing of
    the request was published, and a retry (with the same Idempotency-Key) is safe."""

    retry_after_s = RETRY_AFTER_S


_KEY_HEADERS = {API_KEY_HEADER, *SENTRY_AUTH_HEADERS}
# \Z, not $: a path may not end in a newline ($ would take /v1/crashes\n, and the path's last part
# is the key of a route whose credential is there)
_ROUTES = [(re.compile("^" + re.sub(r"\{[^/]+\}", "[^/]+", route.path) + r"\Z"), route) for route in API_ROUTES]


def return_freed_buffers() -> None:
    """A request's body, up to 1 MiB, is copied a few times on its way through a handler, hundreds
    of times a second on dozens of threads. glibc serves such buffers from per-thread arenas once
    its mmap threshold has grown past them (it grows at the first large free) and keeps what they
    freed: after a x10 spike a serve held 200 MB of free memory for good. A fixed threshold maps
    each large buffer apart and unmaps it when freed; two arenas bound the rest. Other C libraries:
    nothing to do."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, LARGE_BUFFER_BYTES)
    mallopt(_M_ARENA_MAX, 2)


def route(method: str, path: str) -> ApiRoute | None:
    """The route the request is for: its function, template and who may call it."""
    return next((r for pattern, r in _ROUTES if r.method == method and pattern.match(path)), None)


def encoded_path(scope: Scope) -> str:
    """The path as the client encoded it, as API Gateway (REST) gives it to a Lambda, whose routes
    match it a segment a parameter and decode each (api.resolver); what it sent unencoded, encoded."""
    return quote(scope.get("raw_path") or scope["path"].encode(), safe="/%!$&'()*+,;=:@-._~")


def proxy_event(scope: Scope, body: bytes, api_key_id: str | None = None, path: str | None = None,
                query: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """`path`: the encoded path, and `query` its values, when the caller has them already
    (encoded_path, query_values)."""
    headers: dict[str, list[str]] = {}
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").lower()
        if name not in _KEY_HEADERS:  # checked by the gateway; no handler needs them, and none can leak them
            headers.setdefault(name, []).append(_text(raw_value))
    query = query_values(scope) if query is None else query
    try:
        text, is_base64 = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, is_base64 = pybase64.b64encode(body).decode(), True
    client = scope.get("client") or ("127.0.0.1", 0)
    path = path or encoded_path(scope)
    return {
        "resource": "/{proxy+}",
        "path": path,
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
            "path": path,
            "stage": "local",
            "requestId": str(uuid.uuid4()),
            "requestTimeEpoch": now_ms(),
            "protocol": scope.get("http_version", "1.1"),
            # as API Gateway names the caller's key (the key itself stays here)
            "identity": {"sourceIp": client[0], "apiKeyId": api_key_id},
        },
        "body": text if body else None,
        "isBase64Encoded": is_base64,
    }


class QueueDelay:
    """CoDel (Nichols and Jacobson, "Controlling Queue Delay") on the wait between a request's
    arrival and a handler thread taking it. A burst queues and is served; a queue that stands
    (the shortest wait of an interval above the target) means more arrives than the handlers
    finish, and then a request that waited past twice the target behind others is shed as it comes
    out: 503 at once instead of seconds more in line, and the line drains. Called from the handler
    threads."""

    def __init__(self, target_s: float = QUEUE_TARGET_S, interval_s: float = QUEUE_INTERVAL_S) -> None:
        self._target_s, self._interval_s = target_s, interval_s
        self._lock = threading.Lock()
        self._interval_ends = 0.0
        self._shortest = 0.0
        self._standing = False

    def admit(self, waited_s: float, now: float) -> bool:
        """Whether a request that waited `waited_s` until `now` (monotonic seconds) is served."""
        with self._lock:
            if now < self._interval_ends:
                self._shortest = min(self._shortest, waited_s)
                return not (self._standing and waited_s > 2 * self._target_s)
            # a new interval: judged by the last one, unless a whole interval went by with no
            # request (the queue was empty then); its first request is served either way
            self._standing = now < self._interval_ends + self._interval_s and self._shortest > self._target_s
            self._shortest = waited_s
            self._interval_ends = now + self._interval_s
            return True

    @property
    def standing(self) -> bool:
        return self._standing


class Gateway:
    """`max_in_flight` bounds the requests in the handlers, running or waiting for one of the
    `workers` threads (serve passes BLACKBOX_MAX_IN_FLIGHT), and `max_arriving_bytes` the bytes of
    the bodies still arriving. Past either a request is answered 503 with Retry-After at once (but
    health): a queue only turns overload into seconds of latency, then client timeouts and retries,
    and holds every waiting body in memory. Within the bounds, `queue` sheds what has waited too
    long for a handler thread once a queue stands."""

    def __init__(self, keys: ApiKeys | None = None, *, workers: int = 32, body_timeout: float = BODY_TIMEOUT,
                 max_in_flight: int = MAX_IN_FLIGHT, max_arriving_bytes: int = MAX_ARRIVING_BYTES,
                 queue: QueueDelay | None = None) -> None:
        self._keys = keys or ApiKeys()
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lambda")
        self._workers = workers
        self._handlers: dict[str, Handler] = {}
        self._body_timeout = body_timeout
        self._max_in_flight = max_in_flight
        self._max_arriving_bytes = max_arriving_bytes
        # only the event loop's thread counts these, so no lock
        self._in_flight = 0
        self._arriving = 0
        self._queue = queue or QueueDelay()

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
        try:
            if not self._keys.configured:
                _check_loopback(scope)
            path = encoded_path(scope)
            matched = route(scope["method"], path)
            query = query_values(scope)
            static = asset(scope["path"]) if matched is None and scope["method"] == "GET" else None
            if static is not None:
                data, content_type = static
                await self._respond(send, {
                    "statusCode": 200,
                    "headers": {"Content-Type": content_type, **DASHBOARD_HEADERS},
                    "body": pybase64.b64encode(data).decode(),
                    "isBase64Encoded": True,
                })
                return
            if matched is None:
                raise NotFound(f"no route for {scope['method']} {scope['path']}")
            function = matched.function
            # an open route takes any key, or none, and so does any route where no keys are set
            # (but a Sentry SDK's protocol is checked where it is read)
            reads_key = matched.roles is not None and (self._keys.configured or matched.credential == "sentry")
            caller = self._keys.authorize(_presented_key(scope, matched, path, query) if reads_key else None,
                                          matched.roles, f"{matched.method} {matched.path}",
                                          KEY_PLACES[matched.credential])
            # health has room of its own past the bound, and no standing queue sheds it: it tells an
            # orchestrator that the process lives, overloaded or not
            health = matched.path == HEALTH_PATH
            # before the body is read: shedding is cheap only if it is quick
            # a Content-Length over the limit is 413 as the body is read, not 503 for want of room
            self._check_capacity(health, min(_content_length(scope), MAX_BODY_BYTES))
        except BlackboxError as error:
            # a shed request's client will be back, and the HTTP parser drops the rest unbuffered;
            # otherwise closing is what stops the rest coming
            await self._error(send, error, close=not isinstance(error, Overloaded))
            return
        try:
            body = await self._read_body(scope, receive)
        except (_Disconnected, BlackboxError) as error:
            if isinstance(error, BlackboxError):  # answered before the body ended: the connection goes
                await self._error(send, error, close=True)
            return
        try:
            # again once the body is in: others may have gone in while it arrived
            self._check_capacity(health)
        except Overloaded as error:
            await self._error(send, error)
            return
        self._in_flight += 1
        try:
            event = proxy_event(scope, body, caller.key_id if caller else None, path, query)
            loop = asyncio.get_running_loop()
            # only a request that waits behind the others is in a line that shedding drains; one a
            # thread is free for may still wait, for a CPU busy elsewhere, and its 503 drains nothing
            queued = self._in_flight > self._workers
            result = await loop.run_in_executor(self._executor, self._run, self._handler(function), function, event,
                                                time.monotonic(), queued and not health)
        except Overloaded as error:
            await self._error(send, error, close=False)
            return
        finally:
            self._in_flight -= 1
        await self._respond(send, result)

    def _run(self, handler: Handler, function: str, event: dict[str, Any], arrived: float, sheds: bool) -> Any:
        """On a handler thread: the handler's answer, unless the request waited too long for it
        (and `sheds`)."""
        now = time.monotonic()
        if not self._queue.admit(now - arrived, now) and sheds:
            raise Overloaded(f"this server's requests wait {(now - arrived) * 1000:.0f} ms for a handler; "
                             f"try again in {RETRY_AFTER_S} s, with the same Idempotency-Key")
        return handler(event, LocalContext(function_name=function))

    def _check_capacity(self, health: bool, length: int = 0) -> None:
        """503 past the bound (health's past its room beyond it), or while a queue stands for one
        more that would wait in it (not health): the cheapest 503 comes before the body is read,
        and cannot make the line longer; or for a body of `length` that the arriving bytes have
        no room for."""
        room = self._max_in_flight + (HEALTH_ROOM if health else 0)
        if self._in_flight >= room or (not health and self._queue.standing and self._in_flight >= self._workers):
            raise Overloaded(f"this server has {self._in_flight} requests in hand; "
                             f"try again in {RETRY_AFTER_S} s, with the same Idempotency-Key")
        self._check_arriving(length)

    def _check_arriving(self, more: int) -> None:
        if self._arriving + more > self._max_arriving_bytes:
            raise Overloaded(f"this server is receiving {self._arriving} bytes of bodies; "
                             f"try again in {RETRY_AFTER_S} s, with the same Idempotency-Key")

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self._executor.shutdown(wait=True)
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes:
        """The whole body, or PayloadTooLarge as soon as it is known to be over the contract's limit
        (from Content-Length, before a byte is read; or from the bytes of a streamed body), or
        RequestTimeout when it has not ended within the body timeout."""
        length = _content_length(scope)
        if length > MAX_BODY_BYTES:
            raise PayloadTooLarge(f"body is {length} bytes; the limit is {MAX_BODY_BYTES}")
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self._body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise _Disconnected
                    chunk = message.get("body", b"")
                    if size + len(chunk) > MAX_BODY_BYTES:
                        raise PayloadTooLarge(f"body is over the limit of {MAX_BODY_BYTES} bytes")
                    # the bytes held bound what arriving bodies take, not their number: a connection
                    # that sends a head and waits holds nothing
                    self._check_arriving(len(chunk))
                    self._arriving += len(chunk)
                    size += len(chunk)
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            raise RequestTimeout(f"the body did not arrive within {self._body_timeout:g} s") from None
        finally:
            self._arriving -= size

    @staticmethod
    async def _error(send: Send, error: BlackboxError, close: bool = False) -> None:
        headers = {"Content-Type": "application/json"}
        if close:
            headers["Connection"] = "close"
        if error.retry_after_s is not None:
            headers["Retry-After"] = str(error.retry_after_s)
        await Gateway._respond(send, {"statusCode": error.status, "headers": headers, "body": json.dumps(error.body())})

    @staticmethod
    async def _respond(send: Send, result: dict[str, Any]) -> None:
        body = result.get("body") or ""
        payload = pybase64.b64decode(body) if result.get("isBase64Encoded") else body.encode()
        headers: dict[str, list[str]] = {k.lower(): list(v) for k, v in (result.get("multiValueHeaders") or {}).items()}
        for name, value in (result.get("headers") or {}).items():
            headers[name.lower()] = [value]
        for name, value in EVERY_ANSWER.items():
            headers.setdefault(name.lower(), [value])
        headers["content-length"] = [str(len(payload))]
        await send({
            "type": "http.response.start",
            "status": result["statusCode"],
            "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, vs in headers.items() for v in vs],
        })
        await send({"type": "http.response.body", "body": payload})


# where a route's clients put the key, as a 401 tells them
KEY_PLACES = {"api-key": f"the {API_KEY_HEADER} header", "sentry": "X-Sentry-Auth or sentry_key (a Sentry DSN's key)",
              "path": "the path's last part"}


def _presented_key(scope: Scope, route: ApiRoute, path: str, query: dict[str, list[str]]) -> str | None:
    """The key the caller presents, where its route's clients put it (`path` encoded, `query` read), None for
    none; a key given twice is 401, as one a proxy in front may read otherwise. A Sentry SDK's
    protocol is checked here, keys or none: the handler is not handed the headers that carry it."""
    if route.credential == "api-key":
        keys = _values(scope, API_KEY_HEADER.encode())
        if len(keys) > 1:
            raise Unauthorized(f"the {API_KEY_HEADER} header is given {len(keys)} times; send it once")
        return next(iter(keys), None)
    if route.credential == "path":
        # a segment decoded, as API Gateway hands the key source its path parameter
        return unquote(path.rstrip("/").rsplit("/", 1)[-1])
    headers: dict[str, list[str]] = {}
    for name, value in scope["headers"]:
        headers.setdefault(name.decode("latin-1"), []).append(_text(value))
    auth = find_auth(headers, query)
    if auth is None:
        return None
    check_protocol(auth)
    return auth.key


def query_values(scope: Scope) -> dict[str, list[str]]:
    """A request's query parameters, each with all of its values in order. Escapes that are not
    UTF-8 are 400: read as U+FFFD, a filter said exact would match a value of that character."""
    query: dict[str, list[str]] = {}
    try:
        pairs = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True, errors="strict")
    except UnicodeDecodeError as exc:
        raise MalformedRequest(f"the query's escapes are not UTF-8 ({exc.reason} at byte {exc.start} of "
                               f"{exc.object[max(0, exc.start - 8):exc.end + 8]!r})") from None
    for name, value in pairs:
        query.setdefault(name, []).append(value)
    return query


def _text(value: bytes) -> str:
    """A header's value without the whitespace around it, which is not part of it (RFC 9110 §5.5)
    and httptools keeps where it trails."""
    return value.decode("latin-1").strip(" \t")


def _values(scope: Scope, name: bytes) -> list[str]:
    """A request header's values (ASGI gives the names in lower case)."""
    return [_text(v) for k, v in scope["headers"] if k == name]


def _content_length(scope: Scope) -> int:
    """The body's length its head says, 0 when it says none (a streamed body); the HTTP parser has
    refused one that is not digits."""
    length = _header(scope, "content-length")
    return 0 if length is None else int(length)


def _header(scope: Scope, name: str) -> str | None:
    """The first value of a request header."""
    return next(iter(_values(scope, name.encode("latin-1"))), None)


def _check_loopback(scope: Scope) -> None:
    hosts = _values(scope, b"host")
    if len(hosts) != 1 or _LOOPBACK_HOST.fullmatch(hosts[0]) is None:
        raise Forbidden("with no API keys configured, only requests to localhost, 127.0.0.1 or [::1] are served")
    # a browser says which page sent a request: one of another site may post a crash reporter's
    # form or text/plain body without asking first (no CORS preflight)
    origins = _values(scope, b"origin")
    # and a GET it makes for an <img> or a <script> says no Origin, only that it is cross-site
    cross_site = not origins and any(site.lower() == "cross-site" for site in _values(scope, b"sec-fetch-site"))
    if (cross_site and not _navigation(scope)) or any(_LOOPBACK_ORIGIN.fullmatch(origin) is None for origin in origins):
        raise Forbidden("with no API keys configured, only pages of localhost, 127.0.0.1 or [::1] may send requests")


def _navigation(scope: Scope) -> bool:
    """A link followed to a page: the browser shows the answer to its user alone (the dashboard
    cannot be framed), whichever site the link was on."""
    return (scope.get("method") in ("GET", "HEAD") and _values(scope, b"sec-fetch-mode") == ["navigate"]
            and _values(scope, b"sec-fetch-dest") == ["document"])


def _answer(error: BlackboxError) -> bytes:
    """A whole HTTP answer that closes the connection, for the protocol below (no ASGI cycle yet)."""
    body = json.dumps(error.body()).encode()
    headers = {"content-type": "application/json", **{k.lower(): v for k, v in EVERY_ANSWER.items()},
               "content-length": str(len(body)), "connection": "close"}
    head = f"HTTP/1.1 {error.status} {HTTPStatus(error.status).phrase}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return (head + "\r\n").encode("latin-1") + body


class _LingeringTransport:
    """A connection's transport for uvicorn, whose close lingers (GuardedHttp.linger)."""

    def __init__(self, transport: asyncio.Transport, protocol: GuardedHttp) -> None:
        self.real, self._protocol = transport, protocol

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def is_closing(self) -> bool:
        return self._protocol.lingering or self.real.is_closing()

    def close(self) -> None:
        self._protocol.linger()


class GuardedHttp(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 (httptools) with limits on a request's head, which it has not: it waits
    for headers forever (a slow client holds a connection), and httptools keeps headers of any size.
    A head must end within `header_timeout` of the connection's opening or of its first byte, and
    within MAX_HEAD_BYTES; else it is answered (408, 431) and the connection closed. A body answered
    before it ended (a shed request's) is dropped as it comes, within `body_timeout`, after which
    the connection idles as after any answer; else the connection is closed."""

    header_timeout = HEADER_TIMEOUT
    body_timeout = BODY_TIMEOUT
    _head_timer: asyncio.TimerHandle | None = None
    _head_bytes = 0
    _head_began = False
    # the line and headers httptools handed over of the head it parses: what began in a read and
    # ended in it too, which the reads' count cannot tell from the previous request's body
    _head_parsed = 0
    _rest_timer: asyncio.TimerHandle | None = None
    # what is refused after the requests before it on the connection: answered once they are
    _refusal: BlackboxError | None = None
    # why a callback stopped the parse, which uvicorn answers as send_400_response
    _stopped: BlackboxError | None = None
    # the request's transfer codings, in order
    _codings: list[str]
    # read since the request's head ended, while its body comes (None: no body coming)
    _body_bytes: int | None = None
    lingering = False
    _lingered = 0
    # from a request's first byte to its body's end: closed meanwhile, the client may still send
    _in_message = False
    _linger_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._real = transport
        super().connection_made(_LingeringTransport(transport, self))  # type: ignore[arg-type]
        self._await_head()

    def linger(self) -> None:
        """Closes as RFC 9112 §9.6 asks: closed with a request's bytes unread, a socket answers
        them with a reset, and a client's stack may drop the answer it had not read yet (Windows'
        does). So the answer goes, then a half-close, and what the client still sends is read
        away until it closes too, for LINGER_S or LINGER_BYTES at most."""
        if self.lingering or self._real.is_closing():
            return
        self.lingering = True
        self._head_done()
        self._rest_done()
        if self.cycle is not None and not self.cycle.response_complete:  # its handler is told, as at a loss
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        # an idle connection (a keep-alive timeout, a stop) owes nothing unread: closed at once
        if not self._in_message or not self._real.can_write_eof():
            self._real.close()
            return
        self._real.write_eof()  # once the answer is out
        self._real.resume_reading()
        self._linger_timer = self.loop.call_later(LINGER_S, self._real.close)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_began = True
        self._head_parsed = 0
        self._codings = []
        self._in_message = True
        self._await_head()
        self._unset_keepalive_if_required()  # armed below when the last body ended in this same read

    def on_message_complete(self) -> None:
        self._body_bytes = None
        self._in_message = False
        super().on_message_complete()
        if self.cycle.response_complete:
            # the rest of a body answered unread is in: uvicorn armed the idle timer at the answer,
            # and that body's bytes stopped it
            self._rest_done()
            self._unset_keepalive_if_required()
            idle = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)
            self.timeout_keep_alive_task = idle

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._refusal is not None and self.cycle.response_complete and not self.pipeline:
            self._refuse(self._refusal)
            return
        if self.cycle.response_complete and self.cycle.more_body and not self.transport.is_closing():
            self._rest_timer = self.loop.call_later(self.body_timeout, self.transport.close)

    def on_url(self, url: bytes) -> None:
        self._parsed(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._body_bytes is not None:
            # a trailer field, after a chunked body: uvicorn would add it to the headers a proxy in
            # front checked (a key, a media type), where RFC 9110 §6.5.1 never merges it. Dropped;
            # its bytes count against the body's framing
            return
        self._parsed(len(name) + len(value) + len(b": \r\n"))
        if name.lower() == b"transfer-encoding":
            # empty list elements are no codings (RFC 9110 §5.6.1)
            codings = (part.strip(" \t").lower() for part in value.decode("latin-1").split(","))
            self._codings += [coding for coding in codings if coding]
        super().on_header(name, value)

    def _parsed(self, size: int) -> None:
        self._head_parsed += size
        if self._head_parsed > MAX_HEAD_BYTES:
            self._stop(_head_too_large())

    def _stop(self, error: BlackboxError) -> NoReturn:
        # httptools raises what a callback raised, and uvicorn calls send_400_response (below)
        self._stopped = error
        raise error

    def on_headers_complete(self) -> None:
        self._head_done()
        if self._codings and self.parser.get_http_version() == "1.0":  # RFC 9112 §6.1: faulty framing
            self._stop(MalformedRequest("HTTP/1.0 has no Transfer-Encoding"))
        if len(self._codings) > 1 and "chunked" not in self._codings[:-1]:  # llhttp refuses the rest
            self._stop(UnsupportedCoding(f"a body is taken as sent or chunked, not {', '.join(self._codings)}"))
        super().on_headers_complete()
        self._body_bytes = 0

    def data_received(self, data: bytes) -> None:
        if self.lingering:
            self._lingered += len(data)
            if self._lingered > LINGER_BYTES:
                self._real.close()
            return
        if self._body_bytes is not None:
            self._body_bytes += len(data)
            if self._body_bytes > MAX_FRAMED_BODY_BYTES:
                self._overflowed()
                return
        self._head_began = False
        super().data_received(data)
        if self._head_timer is not None:
            # a head that began in this read counts from the next: the read may end another request
            self._head_bytes = 0 if self._head_began else self._head_bytes + len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse(_head_too_large())

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_done()
        self._rest_done()
        if self._linger_timer is not None:
            self._linger_timer.cancel()
        self.lingering = True  # nothing more to linger for
        super().connection_lost(exc)

    def _await_head(self) -> None:
        if self._head_timer is None:
            self._head_bytes = 0
            timeout = RequestTimeout(f"the request's headers did not arrive within {self.header_timeout:g} s")
            self._head_timer = self.loop.call_later(self.header_timeout, self._refuse, timeout)

    def _head_done(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _rest_done(self) -> None:
        if self._rest_timer is not None:
            self._rest_timer.cancel()
            self._rest_timer = None

    def send_400_response(self, msg: str) -> None:
        # uvicorn's own answer to what it cannot parse is text/plain: the contract's error instead
        self._refuse(self._stopped or MalformedRequest(f"the request is not HTTP this server reads: {msg}"))

    def _overflowed(self) -> None:
        """A body's framing over its bound: refused, or, answered already (shed), its rest let go."""
        if self.cycle is not None and self.cycle.response_complete:
            self.transport.close()
            return
        self._refuse(PayloadTooLarge(f"a body takes at most {MAX_FRAMED_BODY_BYTES} bytes with its framing"))

    def _refuse(self, error: BlackboxError) -> None:
        self._head_done()
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete and not self.cycle.more_body:
            # a request taken whole before it is answered first: a crash kept must not lose its 202,
            # or its client sends it again; nothing more is read meanwhile. (Bytes wrong inside the
            # request's own body end it: it can never be whole.)
            self._refusal = self._refusal or error
            self.transport.pause_reading()
            return
        self.transport.write(_answer(error))
        self.transport.close()


def _head_too_large() -> HeadersTooLarge:
    return HeadersTooLarge(f"a request's line and headers are over {MAX_HEAD_BYTES} bytes")


def http_config(gateway: Gateway, host: str, port: int) -> uvicorn.Config:
    """How `blackbox serve` runs the gateway: uvicorn with the guarded protocol."""
    # a stop answers what is in flight, but waits no longer than a body may take to arrive
    return uvicorn.Config(gateway, host=host, port=port, http=GuardedHttp, log_level="warning", access_log=False,
                          timeout_graceful_shutdown=int(BODY_TIMEOUT) + 5)
