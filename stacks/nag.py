"""cdk-nag acknowledgments: each says why a rule does not apply, on the narrowest construct (it
covers the construct's children) and, for IAM findings, the exact finding."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule: str, reason: str, findings: Sequence[str] = ()) -> None:
    ids = [f"{rule}[{finding}]" for finding in findings] or [rule]
    for rule_id in ids:
        cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))
