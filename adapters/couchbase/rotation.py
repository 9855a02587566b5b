"""Rotating the Couchbase application user's secret, in Secrets Manager's four steps, by alternating
users: each rotation sets a new password on the other of two users (`blackbox-app`, then
`blackbox-app_clone`, then back) and makes it current. The user the functions signed in with keeps
its password until the rotation after next, so a container holding the last secret (it reads it
once, and the SDK signs in again with it on reconnect) keeps working while new containers read the
new one. Couchbase has no hosted rotation; this is its REST API (`/settings/rbac/users/local`), asked
with the cluster administrator's secret."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

CLONE = "_clone"
CURRENT, PENDING = "AWSCURRENT", "AWSPENDING"
# Couchbase takes any printable password up to 100; Secrets Manager's generator, without these
# (quotes and backslashes would need escaping in the shells that read the secret)
EXCLUDED = "\"'\\`$"


@dataclass(frozen=True)
class CouchbaseRest:
    """The cluster's REST API (port 8091) as one user."""

    base_url: str
    username: str
    password: str

    def call(self, method: str, path: str, form: dict[str, str] | None = None) -> Any:
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        request = urllib.request.Request(self.base_url.rstrip("/") + path, data=data, method=method)
        token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
        with urllib.request.urlopen(request, timeout=10) as answer:
            text = answer.read()
        return json.loads(text) if text.strip() else None


def other_user(username: str) -> str:
    return username.removesuffix(CLONE) if username.endswith(CLONE) else username + CLONE


def _roles(user: dict[str, Any]) -> str:
    """A user's roles (GET .../users/local/<name>) as the PUT takes them: bucket_full_access[blackbox]."""
    parts = []
    for role in user["roles"]:
        scope = [role[key] for key in ("bucket_name", "scope_name", "collection_name") if key in role]
        parts.append(f"{role['role']}[{':'.join(scope)}]" if scope else role["role"])
    return ",".join(parts)


class Rotation:
    """The steps for one secret; `secrets` is a boto3 Secrets Manager client."""

    def __init__(self, secrets: Any, secret_arn: str, admin_secret_arn: str, rest_url: str) -> None:
        self._secrets = secrets
        self._arn = secret_arn
        self._admin_arn = admin_secret_arn
        self._rest_url = rest_url

    def step(self, step: str, token: str) -> None:
        stages = self._secrets.describe_secret(SecretId=self._arn)["VersionIdsToStages"].get(token, [])
        if CURRENT in stages:
            return  # rotated already: a retried step changes nothing
        if step != "createSecret" and PENDING not in stages:
            raise ValueError(f"version {token} of the secret is not pending rotation")
        {"createSecret": self.create, "setSecret": self.set, "testSecret": self.test,
         "finishSecret": self.finish}[step](token)

    def _value(self, stage: str, token: str | None = None, arn: str | None = None) -> dict[str, Any]:
        kwargs = {"VersionId": token} if token else {}
        answer = self._secrets.get_secret_value(SecretId=arn or self._arn, VersionStage=stage, **kwargs)
        value: dict[str, Any] = json.loads(answer["SecretString"])
        return value

    def create(self, token: str) -> None:
        """The other user with a new password, as the pending version (once per token)."""
        try:
            self._value(PENDING, token)
            return
        except self._secrets.exceptions.ResourceNotFoundException:
            pass
        current = self._value(CURRENT)
        password = self._secrets.get_random_password(PasswordLength=32, ExcludeCharacters=EXCLUDED)["RandomPassword"]
        pending = {**current, "username": other_user(current["username"]), "password": password}
        self._secrets.put_secret_value(SecretId=self._arn, ClientRequestToken=token,
                                       SecretString=json.dumps(pending), VersionStages=[PENDING])

    def set(self, token: str) -> None:
        """The pending user on the cluster, with the current user's roles and the new password."""
        current, pending = self._value(CURRENT), self._value(PENDING, token)
        admin = self._value(CURRENT, arn=self._admin_arn)
        rest = CouchbaseRest(self._rest_url, admin["username"], admin["password"])
        user = rest.call("GET", f"/settings/rbac/users/local/{urllib.parse.quote(current['username'])}")
        rest.call("PUT", f"/settings/rbac/users/local/{urllib.parse.quote(pending['username'])}",
                  {"password": pending["password"], "roles": _roles(user)})

    def test(self, token: str) -> None:
        """The pending user signs in (an HTTPError says it did not)."""
        pending = self._value(PENDING, token)
        CouchbaseRest(self._rest_url, pending["username"], pending["password"]).call("GET", "/whoami")

    def finish(self, token: str) -> None:
        versions = self._secrets.describe_secret(SecretId=self._arn)["VersionIdsToStages"]
        current = next(version for version, stages in versions.items() if CURRENT in stages)
        self._secrets.update_secret_version_stage(SecretId=self._arn, VersionStage=CURRENT, MoveToVersionId=token,
                                                  RemoveFromVersionId=current)
