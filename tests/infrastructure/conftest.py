"""The whole CDK app, built once per environment with asset bundling skipped (the packaging test
bundles for real), and a Template per stack."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from stacks.app import Blackbox, build
from stacks.config import cdk_json_context


def blackbox(env: str = "dev", **context: Any) -> tuple[cdk.App, Blackbox]:
    app = cdk.App(context={**cdk_json_context(), "env": env, "aws:cdk:bundling-stacks": [], **context})
    return app, build(app)


@pytest.fixture(scope="session")
def dev() -> Blackbox:
    return blackbox()[1]


@pytest.fixture(scope="session")
def templates(dev: Blackbox) -> dict[str, Template]:
    return {stack.node.id.removeprefix("BlackboxDev").lower(): Template.from_stack(stack) for stack in dev.stacks}


def resources(template: Template, kind: str) -> list[dict[str, Any]]:
    return [r.get("Properties", {}) for r in template.find_resources(kind).values()]
