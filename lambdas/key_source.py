"""API Gateway's key source for the routes of Sentry SDKs (a REQUEST authorizer): a Sentry SDK
puts its key in X-Sentry-Auth, `Authorization: Sentry …` or `?sentry_key=`, where API Gateway's own
check reads only x-api-key. This hands the key to API Gateway as the usage identifier, which then
checks it against the usage plans as it checks x-api-key on capture's routes: an unknown key is
403, a known one is throttled by its own plan. It says nothing of the key itself."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from ports.telemetry import instrumented
from reporters.errors import ReporterError
from reporters.sentry import parse_auth


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # CrashReportClient's URL holds the key in its path (…/unreal/{key}/)
    key: str | None = (event.get("pathParameters") or {}).get("key")
    try:
        key = key or parse_auth(event.get("multiValueHeaders") or {},
                                event.get("multiValueQueryStringParameters") or {}).key
    except ReporterError:
        # the message Lambda authorizers answer 401 with
        raise PermissionError("Unauthorized") from None
    return {
        "principalId": "sentry-sdk",
        "usageIdentifierKey": key,
        "policyDocument": {"Version": "2012-10-17", "Statement": [
            {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": event["methodArn"]}]},
    }
