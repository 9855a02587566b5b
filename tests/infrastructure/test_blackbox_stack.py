"""The stack declares one function per handler and exactly the contract's routes, each wired to
the function that owns it locally."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from local_runtime.functions import API_ROUTES, FUNCTIONS
from stacks.blackbox_stack import BlackboxStack


@pytest.fixture(scope="module")
def stack() -> BlackboxStack:
    return BlackboxStack(cdk.App(), "Test")


@pytest.fixture(scope="module")
def template(stack: BlackboxStack) -> Template:
    return Template.from_stack(stack)


def test_one_function_per_handler(template: Template):
    template.resource_count_is("AWS::Lambda::Function", len(FUNCTIONS))
    for module in FUNCTIONS.values():
        template.has_resource_properties("AWS::Lambda::Function", {
            "Handler": f"{module}.handler", "Runtime": "python3.11", "MemorySize": 1024, "Timeout": 30,
        })


def test_exactly_the_contract_routes(template: Template):
    methods = template.find_resources("AWS::ApiGateway::Method")
    assert sorted(m["Properties"]["HttpMethod"] for m in methods.values()) == sorted(m for m, _, _ in API_ROUTES)
    template.has_resource_properties("AWS::ApiGateway::Resource", {"PathPart": "{reportId}"})
    template.has_resource_properties("AWS::ApiGateway::Resource", {"PathPart": "attachments"})


def test_each_route_invokes_its_function(stack: BlackboxStack, template: Template):
    for method, _, function in API_ROUTES:
        logical_id = stack.get_logical_id(stack.functions[function].node.default_child)  # type: ignore[arg-type]
        template.has_resource_properties("AWS::ApiGateway::Method", {
            "HttpMethod": method,
            "Integration": {"Type": "AWS_PROXY", "Uri": Match.object_like({
                "Fn::Join": Match.array_with([Match.array_with([Match.object_like({
                    "Fn::GetAtt": [logical_id, "Arn"]})])])})},
        })
