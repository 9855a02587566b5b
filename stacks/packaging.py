"""Lambda packaging without Docker: the code asset is the project's runtime packages; the
dependency layer is pip-installed locally from the lock (layer/requirements.txt: every version
pinned, every file's hash checked) for the Lambda platform (binary wheels only, for the runtime's
CPython, glibc and arm64), at synth time, cached by CDK under the lock's hash. The stack walker's
layer is the Makefile's cross-build of stackwalk/ for the same platform, cached under its sources'
hash."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
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
STACKWALK_SOURCE = PROJECT_ROOT / "stackwalk"
# the Makefile's build of it for ARCHITECTURE and the runtime's glibc (Amazon Linux 2023's 2.34); the
# layer puts it in /opt/bin, on the functions' PATH, where adapters/stackwalk.py finds it
WALKER_BUILD = ".tools/lambda/stackwalk/bin/blackbox-stackwalk"

# the packages the handlers import: the code asset holds these alone, whatever else the checkout holds
# (a synth's output inside it, a compose.env)
CODE_PACKAGES = ("adapters", "api", "crashes", "lambdas", "pipeline", "ports", "ranking", "reporters", "retention",
                 "sessions", "webhooks")


def code_excludes() -> list[str]:
    """Every other name at the checkout's top (the patterns match a name at any depth: none of these
    packages holds one of them) and the bytecode caches."""
    return [*(p.name for p in PROJECT_ROOT.iterdir() if p.name not in CODE_PACKAGES), "**/__pycache__", "*.md"]


def pip_command(target: Path) -> list[str]:
    return [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
        # the lock holds every package, and none that the runtime has (boto3 and its own)
        "--requirement", str(LOCK), "--require-hashes", "--no-deps", "--target", str(target / "python"),
        *(arg for platform in PLATFORMS for arg in ("--platform", platform)),
        "--implementation", "cp", "--python-version", PYTHON_VERSION, "--only-binary=:all:",
    ]


def pip_install(output: Path) -> None:
    subprocess.run(pip_command(output), check=True)


def make_walker(output: Path) -> None:
    """Builds the walker if its sources changed since (make installs the toolchain on first use)."""
    subprocess.run(["make", "--silent", "-C", str(PROJECT_ROOT), WALKER_BUILD], check=True)
    (output / "bin").mkdir()
    shutil.copy2(PROJECT_ROOT / WALKER_BUILD, output / "bin")


@jsii.implements(ILocalBundling)
class Local:
    """Bundles on this machine with `build(output_dir)`; CDK would fall back to Docker only if
    this returned False."""

    def __init__(self, build: Callable[[Path], None]) -> None:
        self._build = build

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: object) -> bool:
        self._build(Path(output_dir))
        return True


def bundled(source: Path, build: Callable[[Path], None], exclude: list[str] | None = None) -> lambda_.Code:
    """What `build` makes on this machine, rebuilt only when a file of `source` changes."""
    return lambda_.Code.from_asset(
        str(source), asset_hash_type=AssetHashType.SOURCE, exclude=exclude,
        bundling=BundlingOptions(image=RUNTIME.bundling_image, local=Local(build), command=["false"]),
    )


def code() -> lambda_.Code:
    return lambda_.Code.from_asset(str(PROJECT_ROOT), exclude=code_excludes())


def dependencies() -> lambda_.Code:
    return bundled(LAYER_SOURCE, pip_install)


def walker() -> lambda_.Code:
    """A layer's: bin/blackbox-stackwalk, from stackwalk/'s sources and Cargo.lock."""
    return bundled(STACKWALK_SOURCE, make_walker, exclude=["target"])
