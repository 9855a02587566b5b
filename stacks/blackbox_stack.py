"""The Blackbox functions and the REST API in front of them, built from the same tables the local
runtime uses (local_runtime.functions), so what runs locally is what deploys."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration, Stack
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from local_runtime.functions import API_ROUTES, FUNCTIONS

PROJECT_ROOT = Path(__file__).resolve().parent.parent

# only the runtime packages go into the Lambda asset
ASSET_EXCLUDES = [
    ".*", "cdk.out", "tests", "events", "stacks", "app.py", "cdk.json", "*.md", "Makefile",
    "blackbox-data", "**/__pycache__", "*.egg-info", "build", "node_modules",
]


class BlackboxStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        code = lambda_.Code.from_asset(str(PROJECT_ROOT), exclude=ASSET_EXCLUDES)
        self.functions = {
            name: lambda_.Function(
                self,
                f"Fn-{name}",
                runtime=lambda_.Runtime.PYTHON_3_11,
                architecture=lambda_.Architecture.X86_64,
                handler=f"{module}.handler",
                code=code,
                memory_size=1024,
                timeout=Duration.seconds(30),
                environment={"POWERTOOLS_SERVICE_NAME": f"blackbox-{name}"},
            )
            for name, module in FUNCTIONS.items()
        }
        self.api = apigateway.RestApi(self, "Api", rest_api_name="blackbox")
        for method, path, function in API_ROUTES:
            resource = self.api.root.resource_for_path(path)
            resource.add_method(method, apigateway.LambdaIntegration(self.functions[function]))
