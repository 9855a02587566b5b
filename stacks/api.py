"""The REST API: exactly the contract's routes (the table the local gateway uses), API keys and
usage plans for ingest (crashes, sessions) and game servers (also scores), IAM for the query
routes, request validation, and gateway responses in the contract's error body."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import CfnOutput
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_logs as logs
from constructs import Construct

from local_runtime.functions import API_ROUTES
from stacks.access import ApplicationStack, Platform
from stacks.config import Throttle
from stacks.nag import acknowledge

SKU = {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,64}$"}
MAX_BATCH = 500
# draft-04 JSON Schema, API Gateway's dialect; the handlers check the rest
BODY_SCHEMAS: dict[str, dict[str, Any]] = {
    "/v1/crashes": {"type": "object", "required": ["sku"], "properties": {"sku": SKU}},
    "/v1/sessions": {
        "definitions": {"session": {"type": "object", "required": ["sku", "kind"],
                                    "properties": {"sku": SKU, "kind": {"enum": ["client", "server"]}}}},
        "oneOf": [{"$ref": "#/definitions/session"},
                  {"type": "array", "minItems": 1, "maxItems": MAX_BATCH, "items": {"$ref": "#/definitions/session"}}],
    },
    "/v1/scores": {
        "definitions": {"score": {"type": "object", "required": ["board", "playerId", "score"],
                                  "properties": {"score": {"type": "integer"}}}},
        "oneOf": [{"$ref": "#/definitions/score"},
                  {"type": "array", "minItems": 1, "maxItems": MAX_BATCH, "items": {"$ref": "#/definitions/score"}}],
    },
}
# query parameters API Gateway itself requires (400 before a function runs)
REQUIRED_QUERY = {"/v1/crashes": ["sku"], "/v1/stats": ["sku"], "/v1/crash-groups": ["sku"], "/v1/alerts": ["sku"],
                  "/v1/leaderboards/{board}/rank": ["score"]}
# which gateway errors become which contract error (DESIGN §5)
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
API_FUNCTIONS = sorted({function for _, _, function in API_ROUTES})


class ApiStack(ApplicationStack):
    def __init__(self, scope: Construct, construct_id: str, platform: Platform, **kwargs: object) -> None:
        super().__init__(scope, construct_id, platform, **kwargs)
        config = platform.config
        self.functions = {name: self.adapter_function(name) for name in API_FUNCTIONS}

        access_logs = logs.LogGroup(self, "AccessLogs", retention=logs.RetentionDays.THREE_MONTHS)
        self.api = apigateway.RestApi(
            self, "Api",
            rest_api_name=config.prefix,
            description="Blackbox: crash reports, sessions, scores and their queries",
            cloud_watch_role=True,
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
            api_key_source_type=apigateway.ApiKeySourceType.HEADER,
            binary_media_types=["application/octet-stream", "image/*"],
        )
        validator = self.api.add_request_validator("Validator", validate_request_body=True,
                                                   validate_request_parameters=True)
        for method, path, function in API_ROUTES:
            resource = self.api.root.resource_for_path(path)
            integration = apigateway.LambdaIntegration(self.functions[function])
            if method == "POST":  # ingest: game clients and servers carry an API key
                schema = BODY_SCHEMAS[path]
                model = self.api.add_model(
                    f"Model{path.rsplit('/', 1)[1].title()}", content_type="application/json",
                    schema=apigateway.JsonSchema(schema=apigateway.JsonSchemaVersion.DRAFT4, **_schema(schema)),
                )
                resource.add_method(
                    method, integration, api_key_required=True, request_validator=validator,
                    request_models={"application/json": model},
                )
            else:  # queries and leaderboard settings: signed by an IAM principal
                resource.add_method(
                    method, integration, authorization_type=apigateway.AuthorizationType.IAM,
                    request_validator=validator,
                    request_parameters={f"method.request.querystring.{name}": True
                                        for name in REQUIRED_QUERY.get(path, [])} or None,
                )
        for response_type, (status, code) in GATEWAY_ERRORS.items():
            self.api.add_gateway_response(
                f"Error{code.title().replace('_', '')}{status}{response_type.response_type}",
                type=response_type, status_code=status,
                response_headers={"Content-Type": "'application/json'"},
                templates={"application/json":
                           f'{{"error": "{code}", "message": $context.error.messageString}}'},
            )
        self.ingest_key = self._plan("Ingest", config.ingest_throttle)
        self.server_key = self._plan("Server", config.server_throttle)
        # API Gateway checks that a key is valid; capture checks that scores come with a server key
        self.functions["capture"].add_environment("BLACKBOX_SERVER_KEY_IDS", json.dumps([self.server_key.key_id]))
        CfnOutput(self, "ApiUrl", value=self.api.url, description="the API's base URL (paths start with v1/)")
        CfnOutput(self, "IngestKeyId", value=self.ingest_key.key_id,
                  description="aws apigateway get-api-key --include-value --api-key <id>: for game clients")
        CfnOutput(self, "ServerKeyId", value=self.server_key.key_id,
                  description="aws apigateway get-api-key --include-value --api-key <id>: for game servers")

        acknowledge(self.api, "AwsSolutions-APIG4", (
            "POST routes take API keys: game clients cannot hold IAM credentials; every other route is IAM"))
        acknowledge(self.api, "AwsSolutions-COG4", (
            "no Cognito: ingest uses API keys with usage plans, queries use IAM (DESIGN §5)"))
        acknowledge(self.api, "AwsSolutions-APIG3", (
            "no WAF by default: usage-plan throttling bounds each key; add a web ACL per deployment if needed"))
        acknowledge(self.api, "AwsSolutions-IAM4", (
            "API Gateway's CloudWatch role uses AmazonAPIGatewayPushToCloudWatchLogs, the documented policy"),
            ["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs"])

    def _plan(self, name: str, throttle: Throttle) -> apigateway.IApiKey:
        # not bound to the stage itself (the usage plan does that): the capture function needs the
        # server key id, and the stage depends on the functions
        key = apigateway.ApiKey(self, f"{name}Key", description=f"Blackbox {name.lower()} key", enabled=True)
        plan = self.api.add_usage_plan(
            f"{name}Plan", name=f"{self.api.rest_api_name}-{name.lower()}",
            throttle=apigateway.ThrottleSettings(rate_limit=throttle.rate, burst_limit=throttle.burst),
        )
        plan.add_api_key(key)
        plan.add_api_stage(stage=self.api.deployment_stage)
        return key


def _schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Our JSON-Schema dicts as the CDK JsonSchema's keyword arguments."""
    renames = {"$ref": "ref", "oneOf": "one_of", "minItems": "min_items", "maxItems": "max_items"}
    converted: dict[str, Any] = {}
    for key, value in schema.items():
        name = renames.get(key, key)
        if key == "type":
            converted[name] = apigateway.JsonSchemaType[value.upper()]
        elif key in ("properties", "definitions"):
            converted[name] = {k: apigateway.JsonSchema(**_schema(v)) for k, v in value.items()}
        elif key == "oneOf":
            converted[name] = [apigateway.JsonSchema(**_schema(v)) for v in value]
        elif key == "items":
            converted[name] = apigateway.JsonSchema(**_schema(value))
        else:
            converted[name] = value
    return converted
