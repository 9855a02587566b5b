"""The Couchbase nodes' user data (stacks/couchbase/user-data.sh), rendered as Fn::Sub renders it
and run by bash against stub commands that record their calls: what it downloads, formats,
mounts and chowns, how node 0 creates the cluster and the others join it, where the credentials
come from, what it signals to CloudFormation, and what the daily backup uploads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.infrastructure.user_data import render

VERSION = "7.6.2"
NODE_IP = "10.40.1.10"
FIRST_NODE = "node0.couchbase.blackbox-test.internal"
SECRETS = {
    "arn:aws:secretsmanager:us-east-1:1:secret:admin": {"username": "Administrator", "password": "adminpw0"},
    "arn:aws:secretsmanager:us-east-1:1:secret:app": {"username": "blackbox-app", "password": "apppw0"},
}
STUBBED = ("curl", "dnf", "uname", "aws", "couchbase-cli", "cbbackupmgr", "cfn-signal", "blkid", "mkfs.xfs", "mount",
           "chown", "systemctl", "sleep")

# one program for every stubbed command: it appends its name, argv and the Couchbase credential
# variables to calls.jsonl, fails when STUB_FAIL names it, and prints what the script reads
STUB = textwrap.dedent(f"""\
    #!{sys.executable}
    import json, os, sys, time
    from pathlib import Path

    name, args = Path(sys.argv[0]).name, sys.argv[1:]
    state = Path(os.environ["STUB_STATE"])
    with open(state / "calls.jsonl", "a") as log:
        env = {{k: v for k, v in os.environ.items() if k.startswith("CB_")}}
        log.write(json.dumps({{"command": name, "args": args, "env": env}}) + "\\n")
    fail = os.environ.get("STUB_FAIL", "").split()
    if fail and [name, *args][: len(fail)] == fail:
        sys.exit(1)
    if name == "curl":
        if "-o" in args:
            Path(args[args.index("-o") + 1]).write_text("rpm")
        elif any("api/token" in a for a in args):
            print("imds-token")
        elif any("local-ipv4" in a for a in args):
            print("{NODE_IP}")
    elif name == "uname":
        print(os.environ["STUB_ARCH"])
    elif name == "aws" and args[:2] == ["secretsmanager", "get-secret-value"]:
        print(json.dumps(json.loads(os.environ["STUB_SECRETS"])[args[args.index("--secret-id") + 1]]))
    elif name == "couchbase-cli" and args[0] == "bucket-list":
        # the rest of the listing comes after the name, as from the real server: a reader that
        # stops at the name (grep -q) breaks this pipe, and under pipefail the check fails
        print("blackbox", flush=True)
        time.sleep(0.3)
        print(" bucketType: membase\\n ramQuota: 1610612736")
    elif name == "blkid":
        if "UUID" in args:
            print("0b1c-uuid")
        elif not (state / "formatted").exists():
            sys.exit(2)  # no filesystem on the device
    elif name == "mkfs.xfs":
        (state / "formatted").touch()
    elif name == "cbbackupmgr" and args[0] == "config":
        Path(args[args.index("--archive") + 1], "repo").mkdir(parents=True)
    """)


@dataclass
class Run:
    returncode: int
    output: str
    calls: list[dict[str, Any]]
    root: Path
    device: Path

    def commands(self, command: str, *prefix: str) -> list[list[str]]:
        """The argv of every call of `command` whose arguments begin with `prefix`."""
        return [c["args"] for c in self.calls if c["command"] == command and c["args"][: len(prefix)] == list(prefix)]

    def one(self, command: str, *prefix: str) -> list[str]:
        [args] = self.commands(command, *prefix)
        return args

    def index(self, command: str, *prefix: str) -> int:
        return next(i for i, c in enumerate(self.calls)
                    if c["command"] == command and c["args"][: len(prefix)] == list(prefix))


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


class Node:
    """A machine for the script: stub commands first on PATH, a scratch root, a data device."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.bin = tmp_path / "bin"
        self.state = tmp_path / "state"
        self.root = tmp_path / "root"
        self.device = tmp_path / "sdf"
        for directory in (self.bin, self.state, self.root):
            directory.mkdir()
        self.device.touch()
        stub = self.bin / "stub"
        stub.write_text(STUB)
        stub.chmod(0o755)
        for command in STUBBED:
            (self.bin / command).symlink_to(stub)

    def script(self, index: int) -> Path:
        """The user data of node `index`, rendered with this machine's data device."""
        script = self.tmp / f"user-data-{index}.sh"
        script.write_text(render({
            "AWS::Region": "us-east-1", "AWS::StackName": "BlackboxTestData", "Version": VERSION,
            "AdminSecretArn": "arn:aws:secretsmanager:us-east-1:1:secret:admin",
            "AppSecretArn": "arn:aws:secretsmanager:us-east-1:1:secret:app", "NodeIndex": str(index),
            "ClusterName": "blackbox-test", "DataRamMb": "2048", "Bucket": "blackbox", "BucketRamMb": "1536",
            "Replicas": "1", "FirstNode": FIRST_NODE, "DataDevice": str(self.device),
            "Resource": f"Couchbase{index}Instance", "BackupBucket": "backups-bucket", "BackupPrefix": "couchbase/",
        }))
        return script

    def run(self, index: int, *args: str, fail: str = "", arch: str = "x86_64") -> Run:
        script = self.script(index)
        env = os.environ | {
            "PATH": f"{self.bin}:{os.environ['PATH']}", "COUCHBASE_ROOT": str(self.root),
            "STUB_STATE": str(self.state), "STUB_FAIL": fail, "STUB_ARCH": arch, "STUB_SECRETS": json.dumps(SECRETS),
        }
        result = subprocess.run(["bash", str(script), *args], env=env, capture_output=True, text=True, timeout=60,
                                check=False)
        log = self.state / "calls.jsonl"
        calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return Run(result.returncode, result.stdout + result.stderr, calls, self.root, self.device)


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def test_the_rendered_script_passes_shellcheck(node: Node):
    for index in (0, 1):
        script = node.script(index)
        result = subprocess.run([str(Path(sys.executable).with_name("shellcheck")), "--severity=style", str(script)],
                                capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_node_0_installs_the_server_and_creates_the_cluster(node: Node, arch: str):
    run = node.run(0, arch=arch)
    assert run.returncode == 0, run.output
    # Couchbase's published rpm for the pinned version and this machine, then installed
    download = run.one("curl", "-fsSL", "-o")
    assert download[-1] == (f"https://packages.couchbase.com/releases/{VERSION}/"
                            f"couchbase-server-community-{VERSION}-linux.{arch}.rpm")
    assert ["install", "-y", option(download, "-o")] in run.commands("dnf")
    assert ["install", "-y", "aws-cfn-bootstrap"] in run.commands("dnf")
    # the data volume: formatted (it was blank), in fstab by UUID, mounted, Couchbase's directories on it
    data = run.root / "data"
    assert run.one("mkfs.xfs") == ["-L", "couchbase-data", str(run.device)]
    assert f"UUID=0b1c-uuid {data} xfs defaults,nofail 0 2" in (run.root / "etc" / "fstab").read_text()
    assert run.one("mount") == [str(data)]
    assert (data / "couchbase" / "data").is_dir() and (data / "couchbase" / "index").is_dir()
    assert run.one("chown") == ["-R", "couchbase:couchbase", str(data / "couchbase")]
    node_init = run.one("couchbase-cli", "node-init")
    assert option(node_init, "--node-init-hostname") == NODE_IP
    assert option(node_init, "--node-init-data-path") == str(data / "couchbase" / "data")
    assert option(node_init, "--node-init-index-path") == str(data / "couchbase" / "index")
    # the cluster, with the administrator from Secrets Manager
    secret_ids = {option(a, "--secret-id") for a in run.commands("aws", "secretsmanager", "get-secret-value")}
    assert secret_ids == set(SECRETS)
    init = run.one("couchbase-cli", "cluster-init")
    assert option(init, "-c") == NODE_IP and option(init, "--cluster-name") == "blackbox-test"
    assert option(init, "--cluster-username") == "Administrator" and option(init, "--cluster-password") == "adminpw0"
    assert option(init, "--cluster-ramsize") == "2048"
    bucket = run.one("couchbase-cli", "bucket-create")
    assert option(bucket, "--bucket") == "blackbox" and option(bucket, "--bucket-ramsize") == "1536"
    assert option(bucket, "--bucket-replica") == "1"
    # the application's user: its own credentials, on this bucket only
    user = run.one("couchbase-cli", "user-manage")
    assert option(user, "--rbac-username") == "blackbox-app" and option(user, "--rbac-password") == "apppw0"
    assert option(user, "--roles") == "bucket_full_access[blackbox]"
    [user_call] = [c for c in run.calls if c["command"] == "couchbase-cli" and c["args"][0] == "user-manage"]
    assert user_call["env"]["CB_REST_USERNAME"] == "Administrator" and "-p" not in user_call["args"]
    # node 0 only: the daily backup timer runs an installed copy of this script
    assert run.one("systemctl", "enable") == ["enable", "--now", "couchbase-backup.timer"]
    units = run.root / "etc" / "systemd" / "system"
    service = (units / "couchbase-backup.service").read_text()
    assert f"ExecStart={run.root}/usr/local/sbin/couchbase-node backup" in service
    assert "OnCalendar=" in (units / "couchbase-backup.timer").read_text()
    assert (run.root / "usr" / "local" / "sbin" / "couchbase-node").exists()
    assert not run.commands("couchbase-cli", "server-add")
    # in order, and CloudFormation hears of the success last
    steps = [run.index("curl", "-fsSL", "-o"), run.index("mount"), run.index("chown"),
             run.index("couchbase-cli", "node-init"), run.index("couchbase-cli", "cluster-init"),
             run.index("couchbase-cli", "bucket-create"), run.index("couchbase-cli", "user-manage")]
    assert steps == sorted(steps)
    assert run.calls[-1]["command"] == "cfn-signal" and run.calls[-1]["args"] == [
        "--exit-code", "0", "--stack", "BlackboxTestData", "--resource", "Couchbase0Instance", "--region", "us-east-1"]


def test_the_other_nodes_join_node_0_and_rebalance(node: Node):
    run = node.run(2)
    assert run.returncode == 0, run.output
    assert option(run.one("couchbase-cli", "bucket-list"), "-c") == FIRST_NODE  # waits for node 0's bucket
    add = run.one("couchbase-cli", "server-add")
    assert option(add, "-c") == FIRST_NODE and option(add, "--server-add") == NODE_IP
    assert option(add, "--server-add-username") == "Administrator"
    assert option(run.one("couchbase-cli", "rebalance"), "-c") == FIRST_NODE
    assert run.index("couchbase-cli", "node-init") < run.index("couchbase-cli", "server-add")
    for step in ("cluster-init", "bucket-create", "user-manage"):
        assert not run.commands("couchbase-cli", step), step
    assert not run.commands("systemctl", "enable")
    assert run.calls[-1]["command"] == "cfn-signal"
    assert run.calls[-1]["args"][:2] == ["--exit-code", "0"] and "Couchbase2Instance" in run.calls[-1]["args"]


def test_a_formatted_volume_is_kept(node: Node):
    (node.state / "formatted").touch()
    run = node.run(0)
    assert run.returncode == 0, run.output
    assert not run.commands("mkfs.xfs") and run.commands("mount")


@pytest.mark.parametrize("step", ["curl -fsSL", "mkfs.xfs", "couchbase-cli cluster-init", "couchbase-cli bucket-create",
                                  "couchbase-cli user-manage"])
def test_a_failed_step_fails_the_deploy(node: Node, step: str):
    run = node.run(0, fail=step)
    assert run.returncode != 0
    signal = run.calls[-1]
    assert signal["command"] == "cfn-signal" and option(signal["args"], "--exit-code") != "0"
    assert [c for c in run.calls if c["command"] == "cfn-signal"] == [signal]
    assert not run.commands("systemctl", "enable")  # nothing after the failed step ran


def test_a_node_that_cannot_join_fails_the_deploy(node: Node):
    run = node.run(1, fail="couchbase-cli rebalance")
    assert run.returncode != 0
    assert len(run.commands("couchbase-cli", "rebalance")) == 20  # retried while another node rebalances
    assert option(run.calls[-1]["args"], "--exit-code") != "0"


def test_the_backup_uploads_a_full_backup_of_the_cluster(node: Node):
    run = node.run(0, "backup")
    assert run.returncode == 0, run.output
    config, backup = run.commands("cbbackupmgr")
    archive = option(config, "--archive")
    assert config[0] == "config" and option(config, "--repo") == "blackbox-test"
    assert backup[0] == "backup" and option(backup, "--archive") == archive
    assert option(backup, "--cluster") == "couchbase://127.0.0.1"
    stamp = Path(archive).name
    assert Path(archive).parent == run.root / "data" / "backup"
    assert run.one("aws", "s3", "sync") == ["s3", "sync", archive, f"s3://backups-bucket/couchbase/{stamp}/",
                                            "--region", "us-east-1", "--only-show-errors"]
    # the administrator from Secrets Manager, through the environment: no password on a command line
    [backup_call] = [c for c in run.calls if c["command"] == "cbbackupmgr" and c["args"][0] == "backup"]
    assert backup_call["env"]["CB_USERNAME"] == "Administrator" and backup_call["env"]["CB_PASSWORD"] == "adminpw0"
    assert not any("adminpw0" in arg for call in run.calls for arg in call["args"])
    assert not Path(archive).exists()  # uploaded, not kept on the data volume
    assert not run.commands("cfn-signal")


def test_a_failed_upload_fails_the_backup_and_leaves_no_archive(node: Node):
    run = node.run(0, "backup", fail="aws s3 sync")
    assert run.returncode != 0
    assert not Path(option(run.one("cbbackupmgr", "config"), "--archive")).exists()
