"""What configures a process: the profile that picks the adapters, where the engines are, and the
settings of the functions (retention, spikes, keys)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, get_origin

from pydantic import BaseModel, Field, PositiveInt
from pydantic_settings import BaseSettings, SettingsConfigDict

from api.access import ApiKeys
from api.requests import MAX_IN_FLIGHT
from crashes.alerts import AlertPolicy
from crashes.spikes import SpikePolicy
from ports.limits import MAX_RETENTION_DAYS
from ranking.season_ends import SeasonEndPolicy
from webhooks.delivery import WebhookPolicy

# written by scripts/services start: where the local engines listen
SERVICES_ENV_FILE = ".services/services.env"


class Settings(BaseSettings):
    """Read from BLACKBOX_* environment variables, then the services env file; the command line
    overrides both. The profile picks the adapters; the other fields configure them."""

    model_config = SettingsConfigDict(
        env_prefix="BLACKBOX_", env_file=SERVICES_ENV_FILE, env_nested_delimiter="__", extra="ignore"
    )

    profile: Literal["embedded", "services", "aws"] = "embedded"
    data_dir: Path = Path("blackbox-data")
    log_partitions: int = 4
    # a day at least: 0 would have the purge delete everything (no "keep for ever")
    retention_days: int = Field(default=90, ge=1, le=MAX_RETENTION_DAYS)
    # the event log is a buffer: Kafka's (and MSK's) default of 7 days
    log_retention_days: int = Field(default=7, ge=1, le=MAX_RETENTION_DAYS)
    # e.g. BLACKBOX_SPIKES__FACTOR=5
    spikes: SpikePolicy = SpikePolicy()
    # e.g. BLACKBOX_WEBHOOKS__ALLOW_PRIVATE=true: webhooks may reach loopback and private addresses
    webhooks: WebhookPolicy = WebhookPolicy()
    # e.g. BLACKBOX_SEASON_END__AFTER_S=1: a season's final top is told this long after its end
    season_end: SeasonEndPolicy = SeasonEndPolicy()
    # e.g. BLACKBOX_ALERTS__VELOCITY_RATE=0.05: the velocity and crash-free drop alerts' thresholds
    alerts: AlertPolicy = AlertPolicy()
    # local keys by role (BLACKBOX_API_KEYS__INGEST='["…"]'); in AWS, API Gateway's keys and IAM,
    # and the ids of the keys that may post scores, and of the title keys → their skus (set by the deployment)
    api_keys: ApiKeys = ApiKeys()
    server_key_ids: list[str] = []
    key_skus: dict[str, list[str]] = {}
    kafka_bootstrap: str = "127.0.0.1:19092"
    kafka_topic_prefix: str = ""
    # always TLS: `?ssl_ca=/path/ca.pem` names the CA (scripts/services writes its own), else the system trust store
    mysql_url: str = "mysql://blackbox:blackbox@127.0.0.1:13306/blackbox"
    # how long migrations wait for MySQL to take a connection (RDS Proxy's target registers minutes
    # after the proxy exists); within the migrations custom resource's 600 s timeout
    mysql_migrate_deadline_s: float = 300.0
    couchbase_url: str = "couchbase://127.0.0.1"
    couchbase_bucket: str = "blackbox"
    couchbase_username: str = "blackbox"
    couchbase_password: str = ""
    couchbase_key_prefix: str = ""
    # the aws profile: MSK bootstrap brokers come from kafka_bootstrap, credentials from Secrets Manager
    aws_region: str = "us-east-1"
    mysql_secret_arn: str = ""
    mysql_proxy_host: str | None = None
    couchbase_secret_arn: str = ""
    # the Couchbase rotation function's: the administrator it asks the cluster's REST API as, and where
    couchbase_admin_secret_arn: str = ""
    couchbase_rest_url: str = ""
    spill_bucket: str = ""
    # where the symbol files are, under symbols/ (a bucket of their own, in the stacks)
    symbols_bucket: str = ""
    # where the MSK event source mappings put the batches they gave up on (pipeline.replay)
    failed_batches_bucket: str = ""
    # only `blackbox bench` uses Redis: the sorted-set baseline for leaderboards
    redis_url: str = "redis://127.0.0.1:16379/0"
    # the local gateway's bound on requests in its handlers (running or waiting for a thread): past it,
    # 503 with Retry-After at once, rather than a queue of seconds
    max_in_flight: PositiveInt = MAX_IN_FLIGHT


PREFIX = "BLACKBOX_"
# the BLACKBOX_ variables read elsewhere than here: the walker's path (adapters.stackwalk), the keys
# a command sends (local_runtime.arguments) and where scripts/services keeps its engines
OTHER_VARIABLES = frozenset({"BLACKBOX_STACKWALK", "BLACKBOX_KEY", "BLACKBOX_SERVER_KEY", "BLACKBOX_READ_KEY",
                             "BLACKBOX_SERVICES_DIR"})


def _known_variables() -> tuple[set[str], tuple[str, ...]]:
    """The names read, and the prefixes of those read as a dict's entries (BLACKBOX_KEY_SKUS__<id>)."""
    known, entries = set(OTHER_VARIABLES), []
    for name, field in Settings.model_fields.items():
        known.add(f"{PREFIX}{name.upper()}")
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            known |= {f"{PREFIX}{name.upper()}__{part.upper()}" for part in field.annotation.model_fields}
        elif get_origin(field.annotation) is dict:
            entries.append(f"{PREFIX}{name.upper()}__")
    return known, tuple(entries)


def unknown_variables(names: Iterable[str]) -> dict[str, str | None]:
    """The BLACKBOX_ names among `names` that nothing reads, each with the known name nearest it, if
    one is near: the settings ignore what they do not know, so a misspelt one is not refused."""
    known, entries = _known_variables()
    unknown = sorted(name for name in names if name.upper().startswith(PREFIX) and name.upper() not in known
                     and not name.upper().startswith(entries))
    # judged without the prefix they all share
    rests = {name.removeprefix(PREFIX): name for name in known}

    def near(name: str) -> str | None:
        found = difflib.get_close_matches(name.upper().removeprefix(PREFIX), rests, 1, cutoff=0.75)
        return rests[found[0]] if found else None

    return {name: near(name) for name in unknown}
