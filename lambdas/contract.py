"""The API's OpenAPI document, from the handlers that serve it and the route table (api.document):
api/openapi.yaml is `render()`, and tests/unit/test_contract_drift.py fails when they part."""

from __future__ import annotations

from typing import Any

import yaml

from api.document import build
from lambdas import capture, issues, leaderboards, native, projects, reporter, symbols
from lambdas.functions import API_ROUTES

HEADER = """\
# The HTTP contract docs/api.md describes, generated from the handlers by `blackbox openapi` (`make openapi`
# writes this file): edit the code, not this. tests/e2e/test_openapi.py holds `blackbox serve` to it
# with schemathesis, every route on both profiles.
"""


def document() -> dict[str, Any]:
    apps = (capture.app, reporter.app, leaderboards.app, projects.app, native.app, symbols.app, issues.app)
    return build(apps, {(r.method, r.path): r for r in API_ROUTES})


def render() -> str:
    return HEADER + yaml.safe_dump(document(), sort_keys=False, allow_unicode=True, width=110)
