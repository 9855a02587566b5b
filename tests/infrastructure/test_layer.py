"""The dependency layer is built from a lock generated from pyproject.toml's runtime set (`make
layer-lock`): every package pinned with its hashes, exactly those dependencies and what they need,
their ranges honoured, nothing the Lambda runtime already has (boto3 and its own) and nothing of the
serve, load and bench extras, a confluent-kafka whose admin client works with MSK's OAUTHBEARER;
and every function runs on the architecture the layer's wheels are for (arm64)."""

from __future__ import annotations

import re
import shlex
import tomllib

from aws_cdk.assertions import Template
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from stacks import packaging
from tests.infrastructure.conftest import resources

LOCK = packaging.LAYER_SOURCE / "requirements.txt"
PYPROJECT = packaging.PROJECT_ROOT / "pyproject.toml"
# what the Python runtime of Lambda brings: a copy in the layer would shadow it
RUNTIME_PACKAGES = {"boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six", "urllib3"}
# confluent-kafka-python#1713: before 2.13 the admin client never ran the OAUTHBEARER token
# callback unless polled, so topic provisioning hung on MSK IAM
FIRST_WORKING_CONFLUENT_KAFKA = Version("2.13.0")
# what the serve, load and bench extras bring, which no function imports
NOT_RUNTIME = {"uvicorn", "httptools", "uvloop", "httpx", "rich", "matplotlib", "redis"}


def locked() -> dict[str, tuple[str, list[str]]]:
    """name → (the requirement as written, its hashes)."""
    entries: dict[str, tuple[str, list[str]]] = {}
    text = LOCK.read_text()
    for block in re.split(r"\n(?=\S)", text):
        lines = [line.strip() for line in block.splitlines() if line.strip() and not line.strip().startswith("#")]
        if not lines:
            continue
        requirement = lines[0].removesuffix("\\").strip()
        hashes = [line.removeprefix("--hash=").removesuffix("\\").strip() for line in lines[1:]]
        entries[canonicalize_name(Requirement(requirement).name)] = (requirement, hashes)
    return entries


def ranges() -> list[Requirement]:
    """pyproject.toml's dependencies, the runtime set (boto3 among them, which the runtime has)."""
    return [Requirement(line) for line in tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]]


def direct() -> set[str]:
    """The locked packages that pyproject.toml asks for itself, as uv notes each one's "via"."""
    blocks = re.split(r"\n(?=\S)", LOCK.read_text())
    return {canonicalize_name(Requirement(block.split()[0]).name) for block in blocks
            if not block.startswith("#") and "blackbox (pyproject.toml)" in block}


def compile_command() -> list[str]:
    """The command uv wrote at the top of the lock."""
    header = LOCK.read_text().splitlines()[1]
    return shlex.split(header.removeprefix("#"))


def test_every_locked_package_is_pinned_with_its_hashes():
    entries = locked()
    assert len(entries) >= len(ranges())
    for name, (requirement, hashes) in entries.items():
        assert re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.!+_-]+", requirement), requirement
        assert hashes and all(h.startswith("sha256:") for h in hashes), name


def test_the_lock_holds_nothing_the_runtime_has():
    assert not RUNTIME_PACKAGES & set(locked())


def test_the_lock_holds_nothing_of_the_serve_load_and_bench_extras():
    assert not NOT_RUNTIME & set(locked())


def test_the_lock_is_compiled_from_pyproject_for_the_functions_python():
    command = compile_command()
    assert command[:4] == ["uv", "pip", "compile", "pyproject.toml"], command
    assert "--extra" not in command and "--all-extras" not in command
    assert command[command.index("--python-version") + 1] == packaging.PYTHON_VERSION
    left_out = {command[i + 1] for i, arg in enumerate(command) if arg == "--no-emit-package"}
    assert left_out == RUNTIME_PACKAGES


def test_the_lock_asks_for_exactly_pyprojects_dependencies():
    """A dependency added to or dropped from pyproject.toml without `make layer-lock` fails here."""
    assert direct() == {canonicalize_name(r.name) for r in ranges()} - RUNTIME_PACKAGES


def test_the_lock_satisfies_the_ranges():
    """A range changed without regenerating the lock fails here."""
    entries = locked()
    for wanted in (r for r in ranges() if canonicalize_name(r.name) not in RUNTIME_PACKAGES):
        requirement, _ = entries[canonicalize_name(wanted.name)]
        assert wanted.specifier.contains(Version(requirement.split("==")[1])), (str(wanted), requirement)


def test_confluent_kafka_is_one_whose_admin_client_signs_in_to_msk():
    requirement, _ = locked()["confluent-kafka"]
    assert Version(requirement.split("==")[1]) >= FIRST_WORKING_CONFLUENT_KAFKA
    [wanted] = [r for r in ranges() if r.name == "confluent-kafka"]
    assert not wanted.specifier.contains(Version("2.12.1"))


def test_the_layer_is_built_from_the_lock_for_arm64():
    command = packaging.pip_command(packaging.PROJECT_ROOT / "out")
    assert command[command.index("--requirement") + 1] == str(LOCK)
    assert "--require-hashes" in command and "--no-deps" in command and "--only-binary=:all:" in command
    platforms = [command[i + 1] for i, arg in enumerate(command) if arg == "--platform"]
    assert platforms and all(p.endswith("_aarch64") for p in platforms)


def test_every_function_and_the_layer_are_arm64(templates: dict[str, Template]):
    ours = [f for t in templates.values() for f in resources(t, "AWS::Lambda::Function")
            if f.get("Handler", "").startswith("lambdas.")]
    assert ours and all(f["Architectures"] == ["arm64"] for f in ours), [f["Handler"] for f in ours]
    layers = [layer for t in templates.values() for layer in resources(t, "AWS::Lambda::LayerVersion")]
    assert layers and all(layer["CompatibleArchitectures"] == ["arm64"] for layer in layers)
