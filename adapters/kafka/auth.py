"""Kafka client settings: plaintext on one machine, SASL_SSL + OAUTHBEARER with MSK IAM tokens in
AWS (aws-msk-iam-sasl-signer-python signs them with the function's role)."""

from __future__ import annotations

from typing import Any

from aws_msk_iam_sasl_signer import MSKAuthTokenProvider


def plaintext(bootstrap: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap}


def msk_iam(bootstrap: str, region: str) -> dict[str, Any]:
    def token(_: str | None) -> tuple[str, float]:
        auth_token, expiry_ms = MSKAuthTokenProvider.generate_auth_token(region)
        # librdkafka wants the expiry in seconds since the epoch
        return auth_token, expiry_ms / 1000

    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": token,
    }
