"""Per-environment settings for the stacks, from cdk.json's context (`environments.<name>`; pick
one with `-c env=<name>`), validated before anything is built."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from aws_cdk import RemovalPolicy
from constructs import Node
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from lambdas.functions import BATCH_RECORDS
from ports.limits import MAX_RETENTION_DAYS, Sku

CDK_JSON = Path(__file__).resolve().parent.parent / "cdk.json"


def cdk_json_context() -> dict[str, Any]:
    """cdk.json's context: the CDK CLI passes it to the app; `python app.py` alone must read it."""
    context: dict[str, Any] = json.loads(CDK_JSON.read_text())["context"]
    return context


class Throttle(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rate: float = Field(gt=0, description="steady requests per second per key")
    burst: int = Field(gt=0)


class Title(BaseModel):
    """A game title: its own ingest key and usage plan, so that its storm spends only its own
    throttle; the key may post only these skus."""

    model_config = ConfigDict(extra="forbid")

    skus: list[Sku] = Field(min_length=1)
    throttle: Throttle


class Waf(BaseModel):
    """The web ACL's rate-based rule: requests from one IP address within the window, past which
    the address is answered 429 (with Retry-After: the window) until its rate falls below."""

    model_config = ConfigDict(extra="forbid")

    limit_per_ip: int = Field(ge=10, le=2_000_000_000)
    window_s: Literal[60, 120, 300, 600] = 300


class Consumer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    batch_size: int = Field(ge=1, le=10_000)
    batching_window_s: int = Field(ge=0, le=300)
    retries: int = Field(ge=-1, le=10_000, description="-1: until the record expires")
    # the mapping's event pollers (provisioned mode, where Lambda applies the retry count), each up
    # to 5 MB/s; more than the topic's partitions do not read faster
    min_pollers: int = Field(default=1, ge=1, le=200)
    max_pollers: int = Field(default=6, ge=1, le=2000)

    @model_validator(mode="after")
    def _pollers_ordered(self) -> Consumer:
        if self.min_pollers > self.max_pollers:
            raise ValueError(f"min_pollers {self.min_pollers} is above max_pollers {self.max_pollers}")
        return self


# the deployment's buckets, each named `{prefix}-{purpose}-{account}-{region}` (stacks.data), and S3's
# bound on a bucket's name
BUCKET_PURPOSES = ("spill", "failed-batches", "symbols")
BUCKET_NAME_MOST = 63


class DeployConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    account: str | None = Field(default=None, pattern=r"^\d{12}$")
    region: str = Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")
    prefix: str = Field(default="blackbox", pattern=r"^[a-z][a-z0-9-]{1,20}$")
    vpc_cidr: str = "10.40.0.0/16"
    max_azs: int = Field(default=2, ge=2, le=3)
    # the zones by name: without an account the CDK cannot list a region's zones and caps max_azs at 2
    availability_zones: list[Annotated[str, StringConstraints(pattern=r"^[a-z]{2}(-[a-z]+)+-\d[a-z]$")]] = Field(
        default=[], max_length=3)
    nat_gateways: int = Field(default=1, ge=1, le=3)
    topic_partitions: int = Field(default=6, ge=1, le=120)
    mysql_instance_type: str = "r6g.large"
    mysql_storage_gib: int = Field(default=100, ge=20)
    mysql_multi_az: bool = True
    couchbase_instance_type: str = "r6i.large"
    # Community Edition, which the nodes run, takes at most five nodes in a cluster
    couchbase_nodes: int = Field(default=3, ge=1, le=5)
    couchbase_volume_gib: int = Field(default=200, ge=20)
    couchbase_version: str = Field(default="7.6.2", pattern=r"^\d+\.\d+\.\d+$")
    couchbase_bucket_ram_mb: int = Field(default=8192, ge=256)
    # region → the nodes' image (Amazon Linux 2023 for their architecture), pinned: a newer image
    # would replace every node at the next deploy
    couchbase_ami: dict[str, Annotated[str, StringConstraints(pattern=r"^ami-[0-9a-f]{8,17}$")]]
    couchbase_backup_days: int = Field(default=30, ge=1, description="how long the daily backups are kept")
    lambda_memory_mb: int = Field(default=1024, ge=128, le=10_240)
    ingest_throttle: Throttle = Throttle(rate=2000, burst=4000)
    # with the others, within the account's default throttle (stacks.api.ACCOUNT_RATE): scores come in batches
    server_throttle: Throttle = Throttle(rate=5000, burst=5000)
    # title name (its key's and usage plan's) → its skus and throttle
    titles: dict[Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,31}$")], Title] = {}
    waf: Waf = Waf(limit_per_ip=30_000, window_s=60)
    crash_consumer: Consumer = Consumer(batch_size=BATCH_RECORDS["crash-consumer"], batching_window_s=1, retries=-1)
    session_counter: Consumer = Consumer(batch_size=BATCH_RECORDS["session-counter"], batching_window_s=1, retries=-1)
    ranking_worker: Consumer = Consumer(batch_size=BATCH_RECORDS["ranking-worker"], batching_window_s=1, retries=-1)
    # a walk takes milliseconds for a small program and seconds for a game's dump with large
    # symbol files, 20 s of CPU at most (adapters.stackwalk): 5 reports, each walked up to three
    # times, stay inside the function's 420 s (stacks.processing) at that bound; past the first, a
    # report the invocation has too little time left for is asked for again (crashes.processing)
    minidump_processor: Consumer = Consumer(batch_size=BATCH_RECORDS["minidump-processor"], batching_window_s=1,
                                            retries=-1)
    retention_days: int = Field(default=90, ge=1, le=MAX_RETENTION_DAYS)
    # what the consumed topics keep (the dead letters keep retention_days)
    log_retention_days: int = Field(default=7, ge=1, le=MAX_RETENTION_DAYS)
    alarm_email: str | None = None
    removal: Literal["retain", "destroy"] = "retain"

    @property
    def removal_policy(self) -> RemovalPolicy:
        """What a resource that holds data or logs does when its stack is deleted: it goes with a
        disposable environment (removal=destroy) and stays with any other."""
        return RemovalPolicy.DESTROY if self.removal == "destroy" else RemovalPolicy.RETAIN

    @model_validator(mode="after")
    def _buckets_named(self) -> DeployConfig:
        longest = max(len(f"{self.prefix}-{purpose}-{'0' * 12}-{self.region}") for purpose in BUCKET_PURPOSES)
        if longest > BUCKET_NAME_MOST:
            raise ValueError(f"prefix {self.prefix} in {self.region} names a bucket of {longest} characters, where S3 "
                             f"takes {BUCKET_NAME_MOST}: give a prefix {longest - BUCKET_NAME_MOST} shorter")
        return self

    @model_validator(mode="after")
    def _placed_in_region(self) -> DeployConfig:
        if self.region not in self.couchbase_ami:
            raise ValueError(f"couchbase_ami has no image for {self.region}")
        if self.availability_zones:
            if "max_azs" in self.model_fields_set:
                raise ValueError("give availability_zones or max_azs, not both")
            if not 2 <= len(set(self.availability_zones)) == len(self.availability_zones):
                raise ValueError("availability_zones: two or three distinct zones")
            if any(zone[:-1] != self.region for zone in self.availability_zones):
                raise ValueError(f"availability_zones must be zones of {self.region}")
        return self

    @classmethod
    def from_context(cls, node: Node) -> DeployConfig:
        name = node.try_get_context("env") or "dev"
        environments = node.try_get_context("environments") or {}
        if name not in environments:
            raise ValueError(f"no environment {name!r} in cdk.json's context; known: {', '.join(environments)}")
        return cls.model_validate(environments[name])
