"""CDK entry point: `python app.py` (or `npx cdk synth`) synthesizes without AWS credentials."""

from __future__ import annotations

import aws_cdk as cdk

from stacks.blackbox_stack import BlackboxStack

app = cdk.App()
BlackboxStack(app, "Blackbox")
app.synth()
