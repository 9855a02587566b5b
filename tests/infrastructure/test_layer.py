"""The dependency layer is built from a lock: every package pinned with its hashes, the ranges of
requirements.in honoured, nothing the Lambda runtime already has (boto3 and its own), a
confluent-kafka whose admin client works with MSK's OAUTHBEARER; and every function runs on the
architecture the layer's wheels are for (arm64)."""

from __future__ import annotations

import re

from aws_cdk.assertions import Template
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from stacks import packaging
from tests.infrastructure.conftest import resources

LOCK = packaging.LAYER_SOURCE / "requirements.txt"
RANGES = packaging.LAYER_SOURCE / "requirements.in"
# what the Python runtime of Lambda brings: a copy in the layer would shadow it
RUNTIME_PACKAGES = {"boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six", "urllib3"}
# confluent-kafka-python#1713: before 2.13 the admin client never ran the OAUTHBEARER token
# callback unless polled, so topic provisioning hung on MSK IAM
FIRST_WORKING_CONFLUENT_KAFKA = Version("2.13.0")


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
    return [Requirement(line) for line in RANGES.read_text().splitlines() if line.strip() and not line.startswith("#")]


def test_every_locked_package_is_pinned_with_its_hashes():
    entries = locked()
    assert len(entries) >= len(ranges())
    for name, (requirement, hashes) in entries.items():
        assert re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.!+_-]+", requirement), requirement
        assert hashes and all(h.startswith("sha256:") for h in hashes), name


def test_the_lock_holds_nothing_the_runtime_has():
    assert not RUNTIME_PACKAGES & set(locked())


def test_the_lock_satisfies_the_ranges():
    """A range changed without regenerating the lock fails here."""
    entries = locked()
    for wanted in ranges():
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
