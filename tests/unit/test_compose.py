"""compose.yaml runs the `services` profile's engines in the official images: a valid Compose
file (`docker compose config` where Docker is installed, the Compose Specification's JSON schema
always), on the profile's ports and versions, each dependency waiting on a health check, and
compose.env pointing `blackbox serve --profile services` at them under the profile's own names."""

from __future__ import annotations

import copy
import json
import re
import shutil
import socket
import ssl
import subprocess
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from dotenv import dotenv_values

from adapters.mysql.database import MysqlTarget, tls_context
from adapters.settings import Settings
from stacks.config import DeployConfig

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "compose.yaml"
ENV_FILE = ROOT / "compose.env"
SERVICES_SCRIPT = ROOT / "scripts" / "services"
# vendored from compose-spec/compose-spec, see tests/fixtures/README.md
SCHEMA = ROOT / "tests" / "fixtures" / "compose-spec.json"
ENGINES = ("kafka", "mysql", "couchbase")
# only `blackbox bench` uses Redis, and compose.yaml runs the engines `serve` needs
BENCH_ONLY = {"BLACKBOX_REDIS_URL"}
# broker properties that say where it listens and keeps its data: they differ in a container
ADDRESS_PROPERTIES = {"listeners", "advertised.listeners", "controller.quorum.voters", "log.dirs"}


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
    return loaded


def services() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose()["services"]
    return found


def compose_env() -> dict[str, str]:
    return {name: value or "" for name, value in dotenv_values(ENV_FILE).items()}


SCRIPT = SERVICES_SCRIPT.read_text()
# its settings: KAFKA_PORT=19092, COUCHBASE_BUCKET=blackbox, ...
PROFILE = dict(re.findall(r"^([A-Z_]+)=(\S+)$", SCRIPT, re.MULTILINE))


def heredoc(opening: str, end: str) -> str:
    """The body of one of scripts/services' here-documents."""
    match = re.search(re.escape(opening) + r"\n(.*?)\n" + end + r"\n", SCRIPT, re.DOTALL)
    assert match, f"scripts/services has no here-document {opening!r}"
    return match.group(1)


def profile_env() -> dict[str, str]:
    """What `scripts/services env` prints: the names, and the values that are the script's own settings."""
    lines = heredoc('cat >"$ENV_FILE" <<ENV', "ENV").splitlines()
    return {name: re.sub(r"\$(\w+)", lambda m: PROFILE[m.group(1)], value)
            for name, value in (line.split("=", 1) for line in lines)}


def published(service: str) -> dict[int, tuple[str, int]]:
    """Container port -> (host address, host port) of a service's `ports`."""
    result = {}
    for entry in services()[service]["ports"]:
        address, host_port, container_port = entry.split(":")
        result[int(container_port)] = (address, int(host_port))
    return result


def host_ports(service: str) -> set[int]:
    return {port for _, port in published(service).values()}


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Path in the container -> what is mounted there (the host side may hold ${VAR:-default})."""
    found = {}
    for volume in service["volumes"]:
        match = re.fullmatch(r"(.+):(/[^:]*)(?::ro)?", volume)
        assert match, volume
        found[match.group(2)] = match.group(1)
    return found


def scripts_of(service: dict[str, Any]) -> list[str]:
    """The strings a service runs: entrypoint, command, health check."""
    parts = [service.get("entrypoint", []), service.get("command", []), service.get("healthcheck", {}).get("test", [])]
    return [item for part in parts for item in ([part] if isinstance(part, str) else part)]


def schema_validator() -> jsonschema.Draft7Validator:
    schema = json.loads(SCHEMA.read_text())
    # the draft it declares (as https://json-schema.org/draft-07/schema, which jsonschema does not look up)
    assert schema["$schema"].startswith("https://json-schema.org/draft-07/")
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def docker_compose_available() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "compose", "version"], capture_output=True, check=False).returncode == 0


def test_the_compose_file_is_valid() -> None:
    schema_validator().validate(compose())
    if docker_compose_available():  # also Compose's own reading: interpolation, paths, merge rules
        result = subprocess.run(["docker", "compose", "-f", str(COMPOSE_FILE), "config", "-q"],
                                cwd=ROOT, capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("breaks", [
    lambda c: c["services"]["couchbase-init"]["depends_on"]["couchbase"].update(condition="healthy"),
    lambda c: c["services"]["kafka"].update(ports=19092),
    lambda c: c["services"]["mysql"].update(healthchek=c["services"]["mysql"]["healthcheck"]),
])
def test_the_schema_refuses_what_compose_would(breaks: Any) -> None:
    """The vendored schema is the real one, not a file that accepts anything."""
    broken = copy.deepcopy(compose())
    breaks(broken)
    with pytest.raises(jsonschema.ValidationError):
        schema_validator().validate(broken)


def test_images_are_pinned_to_the_versions_the_project_runs() -> None:
    images = {name: service["image"] for name, service in services().items()}
    for name, image in images.items():
        assert re.fullmatch(r"[\w./-]+:(?:[a-z]+-)?\d+\.\d+\.\d+", image), f"{name}: {image} is not pinned"
    pom = ET.parse(ROOT / "services" / "kafka" / "pom.xml").getroot()
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    kafka = next(d.findtext("m:version", namespaces=ns) for d in pom.iterfind(".//m:dependency", ns)
                 if d.findtext("m:artifactId", namespaces=ns) == "kafka_2.13")
    assert images["kafka"] == f"apache/kafka:{kafka}"
    rds = re.search(r"MysqlEngineVersion\.VER_(\d+)_(\d+)_(\d+)", (ROOT / "stacks" / "data.py").read_text())
    assert rds, "stacks/data.py names no RDS MySQL version"
    assert images["mysql"] == f"mysql:{'.'.join(rds.groups())}"
    couchbase = f"couchbase/server:community-{DeployConfig.model_fields['couchbase_version'].default}"
    assert images["couchbase"] == images["couchbase-init"] == couchbase


def test_the_engines_listen_where_the_services_profile_does() -> None:
    assert host_ports("kafka") >= {int(PROFILE["KAFKA_PORT"])}
    assert host_ports("mysql") >= {int(PROFILE["MYSQL_PORT"])}
    assert host_ports("couchbase") >= {int(PROFILE["COUCHBASE_REST_PORT"])}
    for engine in ENGINES:  # as scripts/services binds them: nothing on the LAN reaches them
        assert {address for address, _ in published(engine).values()} == {"127.0.0.1"}, engine
    # a client goes where the broker's metadata says: the address published, inside and out
    kafka = services()["kafka"]["environment"]
    advertised = kafka["KAFKA_ADVERTISED_LISTENERS"].removeprefix("PLAINTEXT://")
    port = int(advertised.rsplit(":", 1)[1])
    assert published("kafka")[port] == ("127.0.0.1", port)
    assert f"PLAINTEXT://:{port}" in kafka["KAFKA_LISTENERS"].split(",")


def test_compose_env_points_at_what_compose_publishes() -> None:
    env = compose_env()
    advertised = services()["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert env["BLACKBOX_KAFKA_BOOTSTRAP"] == advertised.removeprefix("PLAINTEXT://")
    mysql = MysqlTarget.parse(env["BLACKBOX_MYSQL_URL"])
    mysql_env = services()["mysql"]["environment"]
    assert (mysql.host, mysql.port) == ("127.0.0.1", published("mysql")[3306][1])
    assert (mysql.user, mysql.password, mysql.database) == (
        mysql_env["MYSQL_USER"], mysql_env["MYSQL_PASSWORD"], mysql_env["MYSQL_DATABASE"])
    couchbase = re.fullmatch(r"couchbase://127\.0\.0\.1:(\d+)", env["BLACKBOX_COUCHBASE_URL"])
    assert couchbase, env["BLACKBOX_COUCHBASE_URL"]
    kv = int(couchbase.group(1))
    # the cluster map tells clients the data service's port in the container: it must be the same outside
    assert published("couchbase")[kv] == ("127.0.0.1", kv)


def test_compose_env_uses_the_profiles_names_and_credentials() -> None:
    env = compose_env()
    profile = profile_env()
    assert set(env) == set(profile) - BENCH_ONLY
    assert set(env) <= {f"BLACKBOX_{field.upper()}" for field in Settings.model_fields}
    settings = Settings(profile="services", **{name.removeprefix("BLACKBOX_").lower(): v for name, v in env.items()})
    assert (settings.couchbase_bucket, settings.couchbase_username, settings.couchbase_password) == (
        profile["BLACKBOX_COUCHBASE_BUCKET"], profile["BLACKBOX_COUCHBASE_USERNAME"],
        profile["BLACKBOX_COUCHBASE_PASSWORD"])
    assert settings.couchbase_bucket == Settings.model_fields["couchbase_bucket"].default


def test_mysql_requires_tls_with_the_ca_compose_env_names() -> None:
    mysql = services()["mysql"]
    args = dict(arg.split("=", 1) for arg in mysql["command"] if arg.startswith("--"))
    assert args["--require-secure-transport"] == "ON"
    # the host's TLS directory is scripts/services' (.services/tls), mounted into the container
    assert mounts(mysql)[args["--ssl-ca"].removesuffix("/ca.pem")] == "${BLACKBOX_SERVICES_DIR:-./.services}/tls"
    assert PROFILE["TLS"] == "$STATE/tls" and PROFILE["STATE"] == "${BLACKBOX_SERVICES_DIR:-$ROOT/.services}"
    ca_file = MysqlTarget.parse(compose_env()["BLACKBOX_MYSQL_URL"]).ca_file
    assert ca_file == ".services/tls/ca.pem"  # relative: serve runs from the repository's root
    assert any("--ssl-mode=VERIFY_IDENTITY" in part for part in scripts_of(mysql))


def test_every_dependency_waits_for_a_health_check_or_a_clean_exit() -> None:
    all_services = services()
    for engine in ENGINES:
        assert all_services[engine]["healthcheck"]["test"][0] == "CMD", engine
    waits = 0
    for name, service in all_services.items():
        depends_on = service.get("depends_on", {})
        assert isinstance(depends_on, dict), f"{name}: a list of dependencies waits for nothing"
        for target, how in depends_on.items():
            waits += 1
            if how["condition"] == "service_healthy":
                assert "healthcheck" in all_services[target], f"{name} waits on {target}, which has no health check"
            else:
                assert how["condition"] == "service_completed_successfully", f"{name} -> {target}"
                assert all_services[target].get("restart") == "no", f"{target} is not a one-shot service"
    assert waits


def test_no_script_leaves_a_dollar_for_compose_to_interpolate() -> None:
    """Compose replaces $VAR in the file with the host's value when it reads it: the shell's
    variables must be written $$VAR, or they arrive empty."""
    for name, service in services().items():
        for part in scripts_of(service):
            assert "$" not in part.replace("$$", ""), f"{name}: {part!r}"


STUB = """
couchbase-cli() {
  printf '%s\\n' "$*" >> "$CALLS"
  case "$1" in
    server-list) [ "$INITIALISED" = 1 ] ;;
    bucket-list) [ "$INITIALISED" = 0 ] || printf '%s\\n bucketType: membase\\n' "$BLACKBOX_COUCHBASE_BUCKET" ;;
  esac
}
"""


def run_couchbase_init(tmp_path: Path, initialised: bool) -> list[list[str]]:
    """couchbase-init's script as its container runs it, couchbase-cli replaced by a recorder:
    the calls it makes, each split into its arguments."""
    init = services()["couchbase-init"]
    assert init["env_file"] == ENV_FILE.name
    shell, flags, script = init["entrypoint"]
    calls = tmp_path / f"calls-{initialised}"
    env = {**compose_env(), **init["environment"], "CALLS": str(calls), "INITIALISED": str(int(initialised)),
           "PATH": "/usr/bin:/bin"}
    subprocess.run([shell, flags, STUB + script.replace("$$", "$")], env=env, check=True)
    return [line.split(" ") for line in calls.read_text().splitlines()]


def option(call: list[str], name: str) -> str:
    return call[call.index(name) + 1]


def test_couchbase_init_creates_the_profiles_bucket_and_user(tmp_path: Path) -> None:
    profile = profile_env()
    bucket = profile["BLACKBOX_COUCHBASE_BUCKET"]
    calls = run_couchbase_init(tmp_path, initialised=False)
    assert [call[0] for call in calls] == ["server-list", "cluster-init", "bucket-list", "bucket-create", "user-manage"]
    for call in calls:  # the server's REST port inside the network
        assert option(call, "-c") == "couchbase:8091" and 8091 in published("couchbase")
    create, user = calls[3], calls[4]
    assert option(create, "--bucket") == bucket
    assert (option(user, "--rbac-username"), option(user, "--rbac-password"), option(user, "--roles")) == (
        profile["BLACKBOX_COUCHBASE_USERNAME"], profile["BLACKBOX_COUCHBASE_PASSWORD"], f"bucket_full_access[{bucket}]")


def test_couchbase_init_runs_again_without_redoing_anything(tmp_path: Path) -> None:
    calls = run_couchbase_init(tmp_path, initialised=True)
    assert [call[0] for call in calls] == ["server-list", "bucket-list", "user-manage"]


def test_kafka_runs_with_the_profiles_broker_settings() -> None:
    lines = heredoc('cat >"$dir/server.properties" <<PROPS', "PROPS").splitlines()
    properties = dict(line.split("=", 1) for line in lines)
    environment = services()["kafka"]["environment"]

    def variable(name: str) -> str:  # the apache/kafka image's naming: - is ___, _ is __, . is _
        return "KAFKA_" + name.replace("-", "___").replace("_", "__").replace(".", "_").upper()

    expected = {variable(name): value for name, value in properties.items() if name not in ADDRESS_PROPERTIES}
    actual = {name: str(value).lower() if isinstance(value, bool) else str(value) for name, value in environment.items()
              if name not in {variable(p) for p in ADDRESS_PROPERTIES} and name.startswith("KAFKA_")}
    assert actual == expected


def test_the_tls_command_makes_a_certificate_the_app_accepts_for_127_0_0_1(tmp_path: Path) -> None:
    """mysql's entrypoint runs `scripts/services tls`; its files are the ones mysqld is given."""
    subprocess.run([str(SERVICES_SCRIPT), "tls"], env={"BLACKBOX_SERVICES_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
                   check=True, capture_output=True)
    tls = tmp_path / "tls"
    mysql = services()["mysql"]
    named = {Path(arg.split("=", 1)[1]).name for arg in mysql["command"] if arg.startswith("--ssl-")}
    assert named == {"ca.pem", "server.pem", "server.key"}
    assert "/blackbox/.services/tls/server.key" in mysql["entrypoint"][2]
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tls / "server.pem", tls / "server.key")
    with socket.create_server(("127.0.0.1", 0)) as listener:
        accepted = threading.Thread(target=lambda: server.wrap_socket(listener.accept()[0], server_side=True).close())
        accepted.start()
        with socket.create_connection(listener.getsockname()) as raw, \
                tls_context(str(tls / "ca.pem")).wrap_socket(raw, server_hostname="127.0.0.1") as client:
            assert client.version()
        accepted.join()
