"""CDK entry point: `python app.py` (or `npx cdk synth`) synthesizes every stack without AWS
credentials; `-c env=<name>` picks an environment from cdk.json."""

from __future__ import annotations

import os

import aws_cdk as cdk

from stacks.app import build
from stacks.config import cdk_json_context

# under the CDK CLI the context (cdk.json and -c) arrives through the environment
app = cdk.App(context=None if "CDK_CONTEXT_JSON" in os.environ else cdk_json_context())
build(app)
app.synth()
