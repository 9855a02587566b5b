"""How `blackbox smoke` authenticates its reads: the read key when given, else SigV4 for an
execute-api URL (the deployed query routes are IAM), signed over the request as httpx sends it."""

from __future__ import annotations

import hashlib
import hmac

import httpx
import pytest

from local_runtime.smoke import SigV4, SmokeConfig, SmokeFailed, read_auth

API = "https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com/v1-stage/"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.fixture
def static_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")


def test_a_read_key_wins_and_a_local_serve_needs_nothing(static_credentials):
    assert read_auth(SmokeConfig(url=API, key="k", read_key="r")) == ({"x-api-key": "r"}, None)
    assert read_auth(SmokeConfig(url="http://127.0.0.1:8080", key="k")) == ({}, None)


def test_execute_api_reads_are_signed_for_the_urls_region_over_path_and_query(static_credentials):
    headers, auth = read_auth(SmokeConfig(url=API, key="k"))
    assert headers == {} and isinstance(auth, SigV4)
    request = httpx.Request("GET", f"{API}v1/crashes", params={"sku": "skyrift:pc", "from": "0"})
    [signed] = list(auth.auth_flow(request))
    authorization = signed.headers["authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in authorization and "SignedHeaders=host;x-amz-date" in authorization
    # the signature, computed here by the spec, is over the path and query as httpx sends them
    amz_date = signed.headers["x-amz-date"]
    canonical = "\n".join([
        "GET", "/v1-stage/v1/crashes", "from=0&sku=skyrift%3Apc",
        f"host:{request.url.host}\nx-amz-date:{amz_date}\n", "host;x-amz-date", hashlib.sha256(b"").hexdigest()])
    scope = f"{amz_date[:8]}/eu-west-1/execute-api/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    key = b"AWS4" + SECRET.encode()
    for part in scope.split("/"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    assert authorization.endswith(f"Signature={hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()}")

def test_signing_needs_a_region_and_credentials(static_credentials, monkeypatch: pytest.MonkeyPatch):
    custom_domain = "https://api.blackbox.example/"
    with pytest.raises(SmokeFailed, match="pass --region"):
        read_auth(SmokeConfig(url=custom_domain, key="k", sigv4=True))
    assert isinstance(read_auth(SmokeConfig(url=custom_domain, key="k", sigv4=True, region="us-east-1"))[1], SigV4)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(SmokeFailed, match="no AWS credentials"):
        read_auth(SmokeConfig(url=API, key="k"))
