"""The stack walker's layer: bin/blackbox-stackwalk cross-built for the functions' platform (arm64, no
glibc symbol newer than Amazon Linux 2023's 2.34, else the binary would not load there), given to the
minidump processor and to no other function."""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from stacks import packaging
from stacks.functions import WALKER_MEMORY_MB, WALKERS
from tests.infrastructure.conftest import resources

EM_AARCH64 = 0xB7
RUNTIME_GLIBC = (2, 34)


def glibc_versions(binary: bytes) -> set[tuple[int, ...]]:
    """Every GLIBC_x.y named in the file: its version needs are among them (.dynstr)."""
    return {tuple(map(int, v.split(b"."))) for v in re.findall(rb"GLIBC_(\d+(?:\.\d+)+)", binary)}


# the real bundling: `make` builds the walker on first use (pytest's prerequisite in `make test`)
@pytest.mark.services
def test_the_walker_layer_holds_a_binary_for_the_functions_platform(tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path))  # bundling on: no aws:cdk:bundling-stacks
    lambda_.LayerVersion(cdk.Stack(app, "Walker"), "Walker", code=packaging.walker())
    app.synth()
    [walker] = tmp_path.glob("asset.*/bin/blackbox-stackwalk")
    binary = walker.read_bytes()
    # ELF, 64-bit, little-endian; e_machine at 18
    assert binary[:6] == b"\x7fELF\x02\x01"
    assert struct.unpack_from("<H", binary, 18)[0] == EM_AARCH64
    versions = glibc_versions(binary)
    assert versions and max(versions) <= RUNTIME_GLIBC, sorted(versions)
    assert walker.stat().st_mode & 0o111  # the layer's zip keeps the mode


def test_only_the_minidump_processor_has_the_walker_layer(templates: dict[str, Template]) -> None:
    walking: dict[str, dict[str, Any]] = {}
    for template in templates.values():
        layers = {logical_id for logical_id, layer in template.find_resources("AWS::Lambda::LayerVersion").items()
                  if layer["Properties"]["Description"].startswith("Blackbox's stack walker")}
        for function in resources(template, "AWS::Lambda::Function"):
            if layers & {layer.get("Ref") for layer in function.get("Layers", [])}:
                # stacks.functions describes each as "Blackbox <name> (<handler>)"
                walking[function["Description"].split()[1]] = function
    assert set(walking) == WALKERS == {"minidump-processor"}
    assert all(f["MemorySize"] >= WALKER_MEMORY_MB for f in walking.values())
