"""Lambda packaging without Docker: the code asset is the project's runtime packages; the
dependency layer is pip-installed locally from the lock (layer/requirements.txt: every version
pinned, every file's hash checked) for the Lambda platform (binary wheels only, for the runtime's
CPython, glibc and arm64), at synth time, cached by CDK under the lock's hash."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

PROJECT_ROOT = Path(__file__).resolve().parent.parent
LAYER_SOURCE = Path(__file__).resolve().parent / "layer"
# 3.12, not the 3.11 the project is developed on: confluent-kafka >= 2.5 ships manylinux_2_28
# wheels only, which need the glibc 2.34 of Amazon Linux 2023 (Python >= 3.12 runtimes); the
# 3.11 runtime runs on Amazon Linux 2 (glibc 2.26)
RUNTIME = lambda_.Runtime.PYTHON_3_12
PYTHON_VERSION = "3.12"
# Graviton: every dependency has a manylinux aarch64 wheel for CPython 3.12 (couchbase,
# confluent-kafka, pybase64 and pydantic-core are the compiled ones)
ARCHITECTURE = lambda_.Architecture.ARM_64
PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64")
LOCK = LAYER_SOURCE / "requirements.txt"

# only the packages the handlers import go into the code asset
CODE_EXCLUDES = [
    ".*", "cdk.out", "tests", "events", "stacks", "app.py", "cdk.json", "*.md", "Makefile", "pyproject.toml",
    "blackbox-data", "**/__pycache__", "*.egg-info", "build", "node_modules", "package*.json", "benchmarks",
    "local_runtime", "cli", "scripts", "services", "test-artifacts", "docker-compose.yml", "stackwalk",
]


def pip_command(target: Path) -> list[str]:
    return [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
        # the lock holds every package, and none that the runtime has (boto3 and its own)
        "--requirement", str(LOCK), "--require-hashes", "--no-deps", "--target", str(target / "python"),
        *(arg for platform in PLATFORMS for arg in ("--platform", platform)),
        "--implementation", "cp", "--python-version", PYTHON_VERSION, "--only-binary=:all:",
    ]


@jsii.implements(ILocalBundling)
class LocalPip:
    """Bundles on this machine; CDK would fall back to Docker only if this returned False."""

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: object) -> bool:
        subprocess.run(pip_command(Path(output_dir)), check=True)
        return True


def code() -> lambda_.Code:
    return lambda_.Code.from_asset(str(PROJECT_ROOT), exclude=CODE_EXCLUDES)


def dependencies() -> lambda_.Code:
    return lambda_.Code.from_asset(
        str(LAYER_SOURCE),
        asset_hash_type=AssetHashType.SOURCE,
        bundling=BundlingOptions(image=RUNTIME.bundling_image, local=LocalPip(), command=["false"]),
    )
