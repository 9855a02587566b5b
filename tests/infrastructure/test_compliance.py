"""Every environment synthesizes with cdk-nag's AwsSolutions pack and CDK's CloudFormation
validation active (any unacknowledged finding fails the synth), every acknowledgment gives a
reason, and cfn-lint finds no error in any template. Packaging is checked on a real `npx cdk
synth`: the layer holds Linux wheels, the code asset only the runtime packages."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3

from stacks.packaging import CODE_PACKAGES, PROJECT_ROOT
from tests.infrastructure.conftest import blackbox

ACKNOWLEDGED = cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY


def cfn_lint(templates: list[Path]) -> subprocess.CompletedProcess[str]:
    # the console script: cfnlint has no __main__, and `python -m cfnlint` exits 1 having linted nothing
    linter = Path(sys.executable).parent / "cfn-lint"
    return subprocess.run([str(linter), *map(str, templates)], capture_output=True, text=True, check=False)


def test_cfn_lint_runs_and_finds_errors(tmp_path: Path):
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"Resources": {"Queue": {"Type": "AWS::SQS::Queue",
                                                          "Properties": {"VisibilityTimeout": "soon"}}}}))
    result = cfn_lint([broken])
    assert result.returncode & 2 and "E3012" in result.stdout, (result.returncode, result.stdout)


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_synth_passes_cdk_nag_and_cfn_lint(env: str, tmp_path: Path):
    app, built = blackbox(env)
    assembly = app.synth()  # raises on any unacknowledged finding
    templates = [Path(assembly.directory) / s.template_file for s in built.stacks]
    assert len(templates) == 6 and all(t.exists() for t in templates)
    result = cfn_lint(templates)
    # cfn-lint's exit code is a bit field: 2 = an error, 4 = a warning (W3005 on CDK's own DependsOn),
    # 8 = informational; 1 = it could not run
    assert result.returncode & 3 == 0, (result.returncode, result.stdout, result.stderr)
    reasons = [
        reason
        for stack in built.stacks
        for construct in stack.node.find_all()
        for entry in construct.node.metadata
        if entry.type == ACKNOWLEDGED
        for reason in entry.data.values()
    ]
    assert reasons and all(len(reason) > 30 for reason in reasons)


def test_an_unacknowledged_finding_fails_the_synth():
    app, built = blackbox()
    s3.Bucket(built.data, "Careless")  # no access logs, no TLS-only policy: AwsSolutions-S1, S10
    with pytest.raises(RuntimeError, match=r"(?s)ValidationFailed.*AwsSolutions-S1'.*AwsSolutions-S10'"):
        app.synth()


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_npx_cdk_synth_packages_the_functions(tmp_path: Path, stage: str):
    """What `npx cdk deploy -c env=<stage>` starts with, through the CDK CLI as the runbook runs it."""
    npx = shutil.which("npx")
    assert npx and (PROJECT_ROOT / "node_modules" / ".bin" / "cdk").exists(), "make test runs npm ci"
    out = tmp_path / "cdk.out"
    env = os.environ | {"JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1"}
    result = subprocess.run([npx, "cdk", "synth", "--quiet", "-c", f"env={stage}", "--output", str(out)],
                            cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    manifests = [json.loads(p.read_text()) for p in out.glob("*.assets.json")]
    paths = {f["source"]["path"] for m in manifests for f in m.get("files", {}).values()
             if f["source"].get("packaging") == "zip"}
    layers = [out / p for p in paths if (out / p / "python").is_dir()]
    codes = [out / p for p in paths if (out / p / "lambdas").is_dir()]
    assert layers and codes
    layer = layers[0] / "python"
    assert list((layer / "confluent_kafka").glob("cimpl*.so")) and list(layer.glob("couchbase/**/*.so"))
    assert any("aarch64" in p.name and "linux" in p.name for p in (layer / "pydantic_core").glob("*.so"))
    assert not [p for p in ("boto3", "botocore", "s3transfer") if (layer / p).exists()]  # the runtime's
    code = codes[0]
    assert (code / "lambdas" / "capture.py").exists() and (code / "adapters" / "mysql" / "migrations").is_dir()
    # found from outside: the asset was the checkout but for a list of names, so it held compose.env,
    # loadgen/ and docs/, and a synth's --output inside the checkout copied itself until ENAMETOOLONG
    assert sorted(p.name for p in code.iterdir()) == sorted(CODE_PACKAGES)
    assert not list(code.glob("**/__pycache__"))
    functions = [f["Properties"] for t in out.glob("*.template.json")
                 for f in json.loads(t.read_text())["Resources"].values() if f["Type"] == "AWS::Lambda::Function"]
    handlers = sorted({f["Handler"] for f in functions if f.get("Handler", "").startswith("lambdas.")})
    assert len(handlers) > 10
    imported = subprocess.run([sys.executable, "-I", "-c", IMPORTED_FROM, str(code), str(PROJECT_ROOT), *handlers],
                              env=env, capture_output=True, text=True, check=False)
    assert imported.returncode == 0 and imported.stdout.split() == [], imported.stdout + imported.stderr[-3000:]


# Each handler's module imported with the code asset first on the path; prints each module of this
# project's that came from outside it (the checkout, through the venv's editable install; the venv
# is the layer's stand-in)
IMPORTED_FROM = """
import importlib, os, sys
code, root, handlers = os.path.realpath(sys.argv[1]), os.path.realpath(sys.argv[2]), sys.argv[3:]
sys.path.insert(0, code)
for handler in handlers:
    importlib.import_module(handler.rsplit(".", 1)[0])
for name, module in list(sys.modules.items()):
    where = os.path.realpath(getattr(module, "__file__", None) or "/")
    if where.startswith(root + os.sep) and not where.startswith((code + os.sep, os.path.realpath(sys.prefix) + os.sep)):
        print(name)
"""
