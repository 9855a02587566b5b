"""The REST API: exactly the contract's routes (the table the local gateway uses), API keys and
usage plans for ingest (crashes, sessions), each title (its own skus only, its own throttle) and
game servers (also scores), IAM for the query routes, request validation, a web ACL with a rate
limit per IP, and gateway responses in the contract's error body."""

from __future__ import annotations

import json
import re
from typing import Any

from aws_cdk import Annotations, CfnOutput, Duration
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_logs as logs
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from api.document import reached
from api.resolver import EVERY_ANSWER
from lambdas.contract import document
from lambdas.functions import API_ROUTES
from ports.limits import MAX_BODY_BYTES
from stacks.access import ApplicationStack, Platform
from stacks.config import DeployConfig, Throttle, Waf
from stacks.nag import acknowledge

# What API Gateway checks of a body before a function runs: a first gate, derived from the contract's
# schema (lambdas.contract) in the words draft-04 and API Gateway mean as the handlers do. Its
# validator counts a string's length in UTF-16 units (an astral character is two) and its \w is
# ASCII, so lengths and Python patterns are left to the handlers; types, required fields, bounds,
# enums and ASCII patterns stay.
GATE_KEYWORDS = frozenset({"type", "required", "properties", "items", "enum", "minItems", "maxItems", "maxProperties",
                           "anyOf", "oneOf", "$ref", "additionalProperties", "minimum", "maximum", "pattern"})
SCHEMA_KEYWORDS = frozenset({"items", "additionalProperties"})
SCHEMA_MAPS = frozenset({"properties", "definitions"})
SCHEMA_LISTS = frozenset({"anyOf", "oneOf"})


def _gate(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` as API Gateway's gate; a reference points into `definitions`."""
    return {key: _gated(key, value) for key, value in schema.items()
            if key in GATE_KEYWORDS and not (key == "pattern" and ("\\w" in value or "(?" in value))}


def _gated(key: str, value: Any) -> Any:
    if key == "$ref":
        return "#/definitions/" + value.rsplit("/", 1)[1]
    # draft-04's integer has no fraction, where the contract's takes 7.0 for 7 (ports.limits.Int64)
    if key == "type" and value == "integer":
        return "number"
    if key in SCHEMA_MAPS:
        return {k: _gate(v) for k, v in value.items()}
    if key in SCHEMA_LISTS:
        return [_gate(option) for option in value]
    if key in SCHEMA_KEYWORDS and isinstance(value, dict):
        return _gate(value)
    return value


CONTRACT = document()
OPERATIONS = {(method.upper(), path): operation for path, operations in CONTRACT["paths"].items()
              for method, operation in operations.items()}


def _body_gate(operation: dict[str, Any]) -> dict[str, Any] | None:
    """A route's body gate, with the definitions its schema reaches. A schema that is a reference
    alone is that definition itself: beside a `$ref`, draft-04 ignores every other member."""
    if "application/json" not in operation.get("requestBody", {}).get("content", {}):
        return None
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    definitions = CONTRACT["components"]["schemas"]
    root = definitions[schema["$ref"].rsplit("/", 1)[1]] if list(schema) == ["$ref"] else schema
    gated = {name: _gate(definitions[name]) for name in sorted(reached(root, definitions))}
    return _gate(root) | ({"definitions": gated} if gated else {})


def _required_query(operation: dict[str, Any]) -> list[str]:
    """What API Gateway asks for itself (400 before a function runs)."""
    return [p["name"] for p in operation.get("parameters", []) if p["in"] == "query" and p.get("required")]


# which gateway errors become which contract error (docs/api.md)
GATEWAY_ERRORS = {
    apigateway.ResponseType.BAD_REQUEST_BODY: ("400", "invalid_field"),
    apigateway.ResponseType.BAD_REQUEST_PARAMETERS: ("400", "missing_field"),
    apigateway.ResponseType.UNAUTHORIZED: ("401", "unauthorized"),
    apigateway.ResponseType.MISSING_AUTHENTICATION_TOKEN: ("403", "forbidden"),
    apigateway.ResponseType.INVALID_API_KEY: ("403", "forbidden"),
    apigateway.ResponseType.INVALID_SIGNATURE: ("403", "forbidden"),
    apigateway.ResponseType.EXPIRED_TOKEN: ("403", "forbidden"),
    apigateway.ResponseType.ACCESS_DENIED: ("403", "forbidden"),
    apigateway.ResponseType.RESOURCE_NOT_FOUND: ("404", "not_found"),
    apigateway.ResponseType.REQUEST_TOO_LARGE: ("413", "payload_too_large"),
    apigateway.ResponseType.UNSUPPORTED_MEDIA_TYPE: ("415", "unsupported_media_type"),
    apigateway.ResponseType.THROTTLED: ("429", "throttled"),
    apigateway.ResponseType.QUOTA_EXCEEDED: ("429", "throttled"),
    apigateway.ResponseType.DEFAULT_4_XX: ("400", "bad_request"),
    apigateway.ResponseType.DEFAULT_5_XX: ("503", "unavailable"),
}
# API Gateway's throttle of an account in a region, before any usage plan's: the default quota
ACCOUNT_RATE, ACCOUNT_BURST = 10_000, 5_000
# when a throttled client may try again: a usage plan's bucket refills every second; a quota (none
# is set) would not before its period ends. By the type's name: jsii's objects for it differ
RETRY_AFTER = {apigateway.ResponseType.THROTTLED.response_type: "1",
               apigateway.ResponseType.QUOTA_EXCEEDED.response_type: "60"}
API_FUNCTIONS = sorted({route.function for route in API_ROUTES})
# A Sentry SDK's key comes in X-Sentry-Auth, `Authorization: Sentry …` or the query, which API
# Gateway's key check does not read (it reads x-api-key, or an authorizer's answer, API-wide): its
# routes are an API of their own, whose authorizer (lambdas.key_source) hands API Gateway the key,
# under the same usage plans, so capture's routes keep the header check and no authorizer's call
SENTRY_ROUTES = tuple(route for route in API_ROUTES if route.credential != "api-key")
KEY_SOURCE = "key-source"


class ApiStack(ApplicationStack):
    def __init__(self, scope: Construct, construct_id: str, platform: Platform, **kwargs: object) -> None:
        super().__init__(scope, construct_id, platform, **kwargs)
        config = platform.config
        self.functions = {name: self.adapter_function(name) for name in API_FUNCTIONS}
        self.api = self._rest_api("Api", config.prefix, "Blackbox: crash reports, sessions, scores and their queries",
                                  apigateway.ApiKeySourceType.HEADER, ["application/octet-stream", "image/*"])
        # every body as bytes: an envelope may be gzip, whatever its Content-Type says
        # the account's CloudWatch role for API Gateway is one setting an account and region: the first
        # API sets it, and the other's stage, which logs to CloudWatch too, waits for it
        self.native_api = self._rest_api("NativeApi", f"{config.prefix}-native",
                                         "Blackbox: the uploads of crash reporters studios ship (Sentry SDKs)",
                                         apigateway.ApiKeySourceType.AUTHORIZER, ["*/*"], cloud_watch_role=False)
        self.native_api.deployment_stage.node.add_dependency(self.api.node.find_child("Account"))
        self.functions[KEY_SOURCE] = self.adapter_function(KEY_SOURCE, timeout_s=5)
        key_source = apigateway.RequestAuthorizer(
            self, "SentryKeySource", handler=self.functions[KEY_SOURCE], authorizer_name="sentry-key",
            # no cache: the key may be in a header or the query, and a cache needs one place for it
            identity_sources=[], results_cache_ttl=Duration.seconds(0))
        validator = self.api.add_request_validator("Validator", validate_request_body=True,
                                                   validate_request_parameters=True)
        # an upload's body is bytes no model gates (lambdas.native reads it, within bounds)
        native_validator = self.native_api.add_request_validator("NativeValidator", validate_request_body=True,
                                                                 validate_request_parameters=True)
        for route in API_ROUTES:
            method, path = route.method, route.path
            # no permission for the console's test invocations: two a method outgrew a resource policy
            integration = apigateway.LambdaIntegration(self.functions[route.function], allow_test_invoke=False)
            if route in SENTRY_ROUTES:
                self.native_api.root.resource_for_path(path).add_method(
                    method, integration, api_key_required=True, authorizer=key_source,
                    authorization_type=apigateway.AuthorizationType.CUSTOM, request_validator=native_validator)
                continue
            operation = OPERATIONS[method, path]
            gate = _body_gate(operation)
            models = None if gate is None else {"application/json": self.api.add_model(
                f"Model{operation['operationId'][0].upper()}{operation['operationId'][1:]}",
                content_type="application/json",
                schema=apigateway.JsonSchema(schema=apigateway.JsonSchemaVersion.DRAFT4, **_schema(gate)))}
            # ingest: game clients and servers carry an API key; the rest, queries and leaderboard
            # settings, is signed by an IAM principal
            keyed = route.ingest
            self.api.root.resource_for_path(path).add_method(
                method, integration,
                api_key_required=keyed or None,
                authorization_type=None if keyed else apigateway.AuthorizationType.IAM,
                request_validator=validator, request_models=models,
                request_parameters={f"method.request.querystring.{name}": True
                                    for name in _required_query(operation)} or None,
            )
        self._within_account(config)
        self.ingest_key = self._plan("Ingest", config.ingest_throttle)
        self.server_key = self._plan("Server", config.server_throttle)
        # a key and a usage plan per title: API Gateway throttles each key on its own
        self.title_keys = {name: self._plan(f"Title{pascal_case(name)}", title.throttle, f"title-{name}")
                           for name, title in config.titles.items()}
        # API Gateway checks that a key is valid; capture checks that scores come with a server key,
        # and each capturing function that a title's key posts only its title's skus
        self.functions["capture"].add_environment("BLACKBOX_SERVER_KEY_IDS", json.dumps([self.server_key.key_id]))
        key_skus = json.dumps({self.title_keys[name].key_id: title.skus for name, title in config.titles.items()})
        for name in ("capture", "native"):
            self.functions[name].add_environment("BLACKBOX_KEY_SKUS", key_skus)
        self.web_acl = self._firewall(config.waf)
        CfnOutput(self, "ApiUrl", value=self.api.url, description="the API's base URL (paths start with v1/)")
        CfnOutput(self, "NativeApiUrl", value=self.native_api.url,
                  description="a Sentry DSN's host and path: http(s)://<ingest key>@<this host>/<stage>/<projectId>")
        key_value = "aws apigateway get-api-key --include-value --query value --output text --api-key <id>"
        CfnOutput(self, "IngestKeyId", value=self.ingest_key.key_id,
                  description=f"{key_value}: any sku, on the shared ingest plan (tools, smoke tests)")
        CfnOutput(self, "ServerKeyId", value=self.server_key.key_id,
                  description=f"{key_value}: for game servers")
        for name, key in self.title_keys.items():
            CfnOutput(self, f"TitleKeyId{pascal_case(name)}", value=key.key_id,
                      description=f"{key_value}: for {name}'s game clients, its skus only")

        acknowledge(self.api, "AwsSolutions-APIG4", (
            "POST routes take API keys: game clients cannot hold IAM credentials; every other route is IAM"))
        acknowledge(self.native_api, "AwsSolutions-APIG4", (
            "Sentry SDKs' uploads take the SDK's key, checked by API Gateway against the usage plans"))
        for api in (self.api, self.native_api):
            acknowledge(api, "AwsSolutions-COG4", (
                "no Cognito: ingest uses API keys with usage plans, queries use IAM (docs/api.md)"))
        acknowledge(self.api, "AwsSolutions-IAM4", (
            "API Gateway's CloudWatch role uses AmazonAPIGatewayPushToCloudWatchLogs, the documented policy"),
            ["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs"])

    def _rest_api(self, construct_id: str, name: str, description: str, key_source: apigateway.ApiKeySourceType,
                  binary_media_types: list[str], *, cloud_watch_role: bool = True) -> apigateway.RestApi:
        """A REST API with access logs, tracing, metrics and the contract's error bodies."""
        access_logs = logs.LogGroup(self, f"{construct_id.removesuffix('Api')}AccessLogs",
                                    retention=logs.RetentionDays.THREE_MONTHS,
                                    removal_policy=self.platform.config.removal_policy)
        api = apigateway.RestApi(
            self, construct_id,
            rest_api_name=name,
            description=description,
            cloud_watch_role=cloud_watch_role,
            deploy_options=apigateway.StageOptions(
                stage_name="v1-stage",
                access_log_destination=apigateway.LogGroupLogDestination(access_logs),
                access_log_format=apigateway.AccessLogFormat.json_with_standard_fields(
                    caller=False, http_method=True, ip=True, protocol=True, request_time=True, resource_path=True,
                    response_length=True, status=True, user=True),
                logging_level=apigateway.MethodLoggingLevel.ERROR,
                metrics_enabled=True,
                tracing_enabled=True,
            ),
            api_key_source_type=key_source,
            binary_media_types=binary_media_types,
        )
        for response_type, (status, code) in GATEWAY_ERRORS.items():
            api.add_gateway_response(
                f"Error{code.title().replace('_', '')}{status}{response_type.response_type}",
                type=response_type, status_code=status,
                response_headers={name: f"'{value}'" for name, value in {
                    "Content-Type": "application/json", **EVERY_ANSWER,
                    **({"Retry-After": RETRY_AFTER[response_type.response_type]}
                       if response_type.response_type in RETRY_AFTER else {}),
                }.items()},
                templates={"application/json":
                           f'{{"error": "{code}", "message": $context.error.messageString}}'},
            )
        return api

    def _within_account(self, config: DeployConfig) -> None:
        """Says so at synth when the usage plans allow more than API Gateway's own throttle of the
        account's region, which comes first: past it every key is 429, whatever its plan allows."""
        throttles = [config.ingest_throttle, config.server_throttle, *(t.throttle for t in config.titles.values())]
        rate, burst = sum(t.rate for t in throttles), max(t.burst for t in throttles)
        if rate > ACCOUNT_RATE or burst > ACCOUNT_BURST:
            Annotations.of(self).add_warning_v2(
                "blackbox:throttle-past-account",
                f"the usage plans allow {rate:,.0f} requests a second in all, with a burst of {burst:,} at most, "
                f"where API Gateway throttles an account's region at {ACCOUNT_RATE:,} a second (burst "
                f"{ACCOUNT_BURST:,}) by default, for every API there: ask for more in Service Quotas, or lower "
                "ingest_throttle, server_throttle or the titles' throttle")

    def _plan(self, name: str, throttle: Throttle, plan_name: str | None = None) -> apigateway.IApiKey:
        # not bound to the stage itself (the usage plan does that): the capture function needs the
        # key ids, and the stage depends on the functions
        plan_name = plan_name or name.lower()
        key = apigateway.ApiKey(self, f"{name}Key", description=f"Blackbox {plan_name} key", enabled=True)
        plan = self.api.add_usage_plan(
            f"{name}Plan", name=f"{self.api.rest_api_name}-{plan_name}",
            throttle=apigateway.ThrottleSettings(rate_limit=throttle.rate, burst_limit=throttle.burst),
        )
        plan.add_api_key(key)
        for api in (self.api, self.native_api):
            plan.add_api_stage(stage=api.deployment_stage)
        return key

    def _firewall(self, waf: Waf) -> wafv2.CfnWebACL:
        """A web ACL on the stage: past `limit_per_ip` requests in the window from one address, 429
        in the contract's error body, with Retry-After, until its rate falls below the limit. Usage
        plans bound each key; this bounds one address, whatever keys it holds or makes up. And a
        Content-Length past the contract's limit is 413 before API Gateway takes the body."""
        metric = f"{self.api.rest_api_name}-per-ip"
        acl = wafv2.CfnWebACL(
            self, "WebAcl", scope="REGIONAL", default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
            visibility_config=_visibility(f"{self.api.rest_api_name}-web-acl"),
            custom_response_bodies={key: wafv2.CfnWebACL.CustomResponseBodyProperty(
                content_type="APPLICATION_JSON", content=json.dumps(body)) for key, body in {
                "throttled": {
                    "error": "throttled",
                    "message": f"more than {waf.limit_per_ip} requests from this address in {waf.window_s} s",
                },
                "too-large": {
                    "error": "payload_too_large",
                    "message": f"a body is at most {MAX_BODY_BYTES} bytes as sent (Content-Length)",
                },
            }.items()},
            rules=[wafv2.CfnWebACL.RuleProperty(
                name="rate-per-ip", priority=0, visibility_config=_visibility(metric),
                statement=wafv2.CfnWebACL.StatementProperty(rate_based_statement=(
                    wafv2.CfnWebACL.RateBasedStatementProperty(
                        aggregate_key_type="IP", limit=waf.limit_per_ip, evaluation_window_sec=waf.window_s))),
                action=_refusal(429, "throttled", {"Retry-After": str(waf.window_s)}),
            ), wafv2.CfnWebACL.RuleProperty(
                # API Gateway lets 10 MB through, and a body past Lambda's 6 MB invoke (4.5 MB once
                # base64'd) would fail the integration: a 5xx, which clients retry
                name="body-past-limit", priority=1,
                visibility_config=_visibility(f"{self.api.rest_api_name}-body-past-limit"),
                statement=wafv2.CfnWebACL.StatementProperty(regex_match_statement=(
                    wafv2.CfnWebACL.RegexMatchStatementProperty(
                        regex_string=decimal_above(MAX_BODY_BYTES),
                        field_to_match=wafv2.CfnWebACL.FieldToMatchProperty(single_header={"Name": "content-length"}),
                        text_transformations=[wafv2.CfnWebACL.TextTransformationProperty(priority=0, type="NONE")]))),
                action=_refusal(413, "too-large", {}),
            )],
        )
        for construct_id, api in (("WebAclAssociation", self.api), ("NativeWebAclAssociation", self.native_api)):
            wafv2.CfnWebACLAssociation(self, construct_id, resource_arn=api.deployment_stage.stage_arn,
                                       web_acl_arn=acl.attr_arn)
        return acl


def _refusal(code: int, body_key: str, headers: dict[str, str]) -> wafv2.CfnWebACL.RuleActionProperty:
    """A web ACL's block, answered as the contract's error: `code`, the body of `body_key`."""
    return wafv2.CfnWebACL.RuleActionProperty(block=wafv2.CfnWebACL.BlockActionProperty(
        custom_response=wafv2.CfnWebACL.CustomResponseProperty(
            response_code=code, custom_response_body_key=body_key,
            response_headers=[wafv2.CfnWebACL.CustomHTTPHeaderProperty(name=name, value=value)
                              for name, value in {**headers, **EVERY_ANSWER}.items()])))


def decimal_above(limit: int) -> str:
    """A regular expression of the decimal numbers above `limit`, leading zeros allowed: a web ACL
    compares a header's text, not its number. Longer than `limit`, or as long and above it at the
    first digit where they differ."""
    digits = str(limit)
    above = [f"[1-9][0-9]{{{len(digits)},}}"]
    for i, digit in enumerate(digits):
        if digit != "9":
            rest = len(digits) - i - 1
            above.append(f"{digits[:i]}[{int(digit) + 1}-9]" + (f"[0-9]{{{rest}}}" if rest else ""))
    # AWS WAF's regular expressions take no capturing group
    return f"^0*(?:{'|'.join(above)})$"


def _visibility(metric: str) -> wafv2.CfnWebACL.VisibilityConfigProperty:
    return wafv2.CfnWebACL.VisibilityConfigProperty(
        cloud_watch_metrics_enabled=True, metric_name=metric, sampled_requests_enabled=True)


def pascal_case(name: str) -> str:
    """A title's name in construct and output ids: sky-rift → SkyRift."""
    return "".join(part.title() for part in name.split("-"))


def _schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON-Schema dict as the CDK JsonSchema's keyword arguments."""
    converted: dict[str, Any] = {}
    for key, value in schema.items():
        name = "ref" if key == "$ref" else re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()
        converted[name] = _converted(key, value)
    return converted


def _converted(key: str, value: Any) -> Any:
    if key == "type":
        return apigateway.JsonSchemaType[value.upper()]
    if key in SCHEMA_MAPS:
        return {k: apigateway.JsonSchema(**_schema(v)) for k, v in value.items()}
    if key in SCHEMA_LISTS:
        return [apigateway.JsonSchema(**_schema(v)) for v in value]
    if key in SCHEMA_KEYWORDS and isinstance(value, dict):
        return apigateway.JsonSchema(**_schema(value))
    return value
