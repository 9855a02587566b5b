"""`blackbox smoke`: what one runs after `cdk deploy` (or against a `blackbox serve`). It posts a
crash with an attachment (twice, under one Idempotency-Key), two session events and a score, then
reads each back until it is visible or the deadline passes, printing one line per check. The
first failure is one line and exit 1.

Reads carry the read key when one is given; otherwise they are signed with SigV4 when asked
(`--sigv4`) or when the URL is an execute-api address, as the deployed query routes are IAM."""

from __future__ import annotations

import argparse
import base64
import re
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from local_runtime.arguments import KEY, READ_KEY, SERVER_KEY, bounded, key_option
from ports.timeutil import now_ms

EXECUTE_API = re.compile(r"\.execute-api\.([a-z0-9-]+)\.amazonaws\.com$")
POLL_S = 0.5

T = TypeVar("T")


class SmokeFailed(Exception):
    """A check that did not hold: one line, said as it is."""


@dataclass(frozen=True)
class SmokeConfig:
    url: str
    key: str | None = None
    """None: a serve without keys."""
    server_key: str | None = None
    read_key: str | None = None
    sigv4: bool = False
    region: str | None = None
    sku: str | None = None
    """None: a sku of the run's own, so the session count is exact."""
    board: str = "smoke"
    timeout_s: float = 60.0
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:12])


class SigV4(httpx.Auth):
    """Signs each request for API Gateway (`execute-api`) with the caller's AWS credentials."""

    def __init__(self, region: str, credentials: Any) -> None:
        self._region = region
        self._credentials = credentials

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        from botocore.auth import SigV4Auth  # noqa: PLC0415 - botocore only for SigV4, not every command
        from botocore.awsrequest import AWSRequest  # noqa: PLC0415

        signed = AWSRequest(method=request.method, url=str(request.url), data=request.content,
                            headers={"host": request.url.netloc.decode()})
        SigV4Auth(self._credentials.get_frozen_credentials(), "execute-api", self._region).add_auth(signed)
        request.headers.update(dict(signed.headers.items()))
        yield request


def read_auth(config: SmokeConfig) -> tuple[dict[str, str], httpx.Auth | None]:
    """The headers and signer the query routes need."""
    if config.read_key:
        return {"x-api-key": config.read_key}, None
    host = httpx.URL(config.url).host
    found = EXECUTE_API.search(host)
    if not (config.sigv4 or found):
        return {}, None  # a local serve without keys
    import botocore.session  # noqa: PLC0415 - botocore only for SigV4, not every command

    session = botocore.session.Session()
    region = config.region or (found.group(1) if found else None) or session.get_config_variable("region")
    if not region:
        raise SmokeFailed(f"no region to sign for: {host} is not an execute-api address; pass --region")
    credentials = session.get_credentials()
    if credentials is None:
        raise SmokeFailed("no AWS credentials to sign the reads with (SigV4); configure them or pass --read-key")
    return {}, SigV4(region, credentials)


class Smoke:
    def __init__(self, config: SmokeConfig, client: httpx.Client) -> None:
        self.config = config
        self.sku = config.sku or f"smoke-{config.run}:check"
        self.player = f"smoke-{config.run}"
        self._client = client
        self._read_headers, self._read_auth = read_auth(config)
        # one deadline for the whole run: the posts take milliseconds, the reads wait for the consumers
        self._deadline = time.monotonic() + config.timeout_s

    def _url(self, path: str) -> str:
        return self.config.url.rstrip("/") + path

    def _post(self, path: str, body: Any, key: str | None, idempotency_key: str | None = None) -> dict[str, Any]:
        headers = {name: value for name, value in (("x-api-key", key), ("Idempotency-Key", idempotency_key)) if value}
        answer: dict[str, Any] = _expect(self._client.post(self._url(path), json=body, headers=headers), 202).json()
        return answer

    def _get(self, path: str, params: dict[str, str] | None = None, accept: str = "application/json") -> httpx.Response:
        return self._client.get(self._url(path), params=params, headers={**self._read_headers, "Accept": accept},
                                auth=self._read_auth or httpx.USE_CLIENT_DEFAULT)

    def _until(self, what: str, probe: Callable[[], T | None]) -> T:
        """probe() until it returns something, or SmokeFailed at the deadline."""
        while True:
            found = probe()
            if found is not None:
                return found
            if time.monotonic() > self._deadline:
                raise SmokeFailed(f"{what} not visible within {self.config.timeout_s:g} s")
            time.sleep(POLL_S)

    def checks(self) -> Iterator[tuple[str, Callable[[], str]]]:
        """(name, check) in order; a check returns what it saw or raises SmokeFailed."""
        config = self.config
        started = now_ms()
        attachment = f"smoke run {config.run}".encode()
        crash = {"sku": self.sku, "crashType": "SMOKE_TEST", "platform": "smoke", "buildVersion": config.run,
                 "stackTrace": "#0 0x0000000000000001 in smoke()", "smokeRun": config.run,
                 "attachments": {"smoke.txt": base64.b64encode(attachment).decode()}}
        receipt: dict[str, Any] = {}

        def health() -> str:
            _expect(self._get("/v1/health"), 200)
            return "200"

        def post_crash() -> str:
            receipt.update(self._post("/v1/crashes", crash, config.key, f"smoke-{config.run}"))
            return f"202 eventId {receipt['eventId']}"

        def retry_crash() -> str:
            again = self._post("/v1/crashes", crash, config.key, f"smoke-{config.run}")
            if again != receipt:
                raise SmokeFailed(f"a retry under the same Idempotency-Key got another receipt: {again}")
            return "202, the same receipt"

        def post_sessions() -> str:
            sessions = [{"sku": self.sku, "kind": "client", "playerId": self.player, "sessionId": config.run},
                        {"sku": self.sku, "kind": "server", "sessionId": config.run}]
            accepted = self._post("/v1/sessions", sessions, config.key, f"smoke-{config.run}")
            return f"202 accepted {accepted['accepted']}"

        def post_score() -> str:
            score = {"board": config.board, "playerId": self.player, "score": 1000}
            accepted = self._post("/v1/scores", score, config.server_key or config.key, f"smoke-{config.run}")
            return f"202 accepted {accepted['accepted']}"

        def crash_readable() -> str:
            report = self._until("the crash", lambda: self._report(receipt["eventId"], started))
            full = _expect(self._get(f"/v1/crashes/{report['reportId']}"), 200).json()
            if full["payload"] != crash:
                raise SmokeFailed(f"report {report['reportId']} does not hold the crash as sent")
            # API Gateway answers bytes only to an Accept of the API's binary types (stacks.api)
            data = _expect(self._get(f"/v1/crashes/{report['reportId']}/attachments/smoke.txt",
                                     accept="application/octet-stream"), 200).content
            if data != attachment:
                raise SmokeFailed(f"report {report['reportId']}'s attachment is not the one sent")
            return f"reportId {report['reportId']}, payload and attachment as sent"

        def sessions_counted() -> str:
            # on the run's own sku the count is exact; on a title's sku others may count too
            counted = self._until("the sessions", lambda: self._sessions(started))
            return f"{counted} in the run's minutes"

        def score_ranked() -> str:
            entry = self._until("the score", self._score)
            return f"{config.board}/{self.player}: score {entry['score']}, rank {entry['rank']}"

        yield "health", health
        yield "post crash", post_crash
        yield "retry crash", retry_crash
        yield "post sessions", post_sessions
        yield "post score", post_score
        yield "crash readable", crash_readable
        yield "sessions counted", sessions_counted
        yield "score ranked", score_ranked

    def _report(self, event_id: str, since_ms: int) -> dict[str, Any] | None:
        params = {"sku": self.sku, "from": str(since_ms - 60_000), "limit": "1000"}
        while True:
            page = _expect(self._get("/v1/crashes", params), 200).json()
            found = next((r for r in page["reports"] if r["eventId"] == event_id), None)
            if found is not None or not page["nextCursor"]:
                return found
            params = {"sku": self.sku, "cursor": page["nextCursor"], "limit": "1000"}

    def _sessions(self, since_ms: int) -> int | None:
        params = {"sku": self.sku, "from": str(since_ms - since_ms % 60_000), "granularity": "minute"}
        counted = sum(s["sessions"] for s in _expect(self._get("/v1/stats", params), 200).json()["series"])
        exact = self.config.sku is None
        return counted if (counted == 2 if exact else counted >= 2) else None

    def _score(self) -> dict[str, Any] | None:
        response = self._get(f"/v1/leaderboards/{self.config.board}/players/{self.player}")
        if response.status_code == 404:
            return None
        entry: dict[str, Any] = _expect(response, 200).json()
        return entry if entry["score"] == 1000 else None


def _expect(response: httpx.Response, status: int) -> httpx.Response:
    if response.status_code != status:
        try:
            error = response.json()
            said = f"{error['error']}: {error['message']}"
        except (ValueError, KeyError, TypeError):
            said = response.text[:200].replace("\n", " ")
        raise SmokeFailed(f"{response.request.method} {response.request.url.path} answered "
                          f"{response.status_code} ({said}), not {status}")
    return response


def run(config: SmokeConfig, say: Callable[[str], None] = print) -> bool:
    """Every check in order, one line each; False at the first that fails."""
    name = "setup"
    with httpx.Client(timeout=30) as client:
        try:
            for name, check in Smoke(config, client).checks():
                started = time.monotonic()
                detail = check()
                say(f"ok    {name:<17} {detail} ({(time.monotonic() - started) * 1000:.0f} ms)")
        except (SmokeFailed, httpx.HTTPError) as exc:
            say(f"FAIL  {name:<17} {' '.join(str(exc).split())}")
            return False
    return True


def _main(args: argparse.Namespace) -> int:
    config = SmokeConfig(url=args.url, key=args.key, server_key=args.server_key, read_key=args.read_key,
                         sigv4=args.sigv4, region=args.region, sku=args.sku, board=args.board,
                         timeout_s=args.timeout)
    return 0 if run(config) else 1


def http_url(text: str) -> str:
    """A URL smoke and load can send to: without a scheme, httpx's UnsupportedProtocol read as
    nothing answering."""
    scheme, _, rest = text.partition("://")
    if scheme.lower() not in ("http", "https") or not rest.strip("/"):
        example = f"http://{text}" if "://" not in text and text else "http://127.0.0.1:8080"
        raise argparse.ArgumentTypeError(f"{text!r} is not an http:// or https:// URL, e.g. {example}")
    return text


def register(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """`blackbox smoke`, made by the command line's `command(name, help)`."""
    smoke = command("smoke", "after a deploy: post a crash, sessions and a score, and read them back "
                    "(exit 1 at the first check that fails)")
    smoke.add_argument("--url", required=True, type=http_url,
                       help="the API's base URL, with its http:// or https:// (the ApiUrl output, or a serve's)")
    key_option(smoke, "--key", "a key that may post crashes and sessions (a title's key needs --sku with one of "
               "its skus; none for a serve without keys)", KEY)
    key_option(smoke, "--server-key", "a server key for the score (else --key)", SERVER_KEY)
    key_option(smoke, "--read-key", "a read key (blackbox serve); without one, reads from an execute-api URL are "
               "signed with SigV4", READ_KEY)
    smoke.add_argument("--sigv4", action="store_true", help="sign the reads with SigV4 whatever the URL "
                       "(a custom domain)")
    smoke.add_argument("--region", default=None, help="the region to sign for (default: from the URL)")
    smoke.add_argument("--sku", default=None, help="the sku to post (default: one of the run's own)")
    smoke.add_argument("--board", default="smoke", help="the board to post the score to (default: smoke)")
    smoke.add_argument("--timeout", type=bounded(float, 1.0, 3600.0, "a timeout (seconds, 1 to 3,600)"), default=60,
                       help="seconds for everything to be readable (default: 60)")
    smoke.set_defaults(run=_main)
