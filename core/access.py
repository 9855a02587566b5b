"""Who may call what. An ingest key may post crashes and sessions; a server key may also post
scores and set up leaderboards; reading needs a read key (IAM in AWS); health is open. Keys are
compared in constant time and never logged."""

from __future__ import annotations

import hmac
from enum import StrEnum

from pydantic import BaseModel, Field

from core.errors import Forbidden, Unauthorized

API_KEY_HEADER = "x-api-key"


class Role(StrEnum):
    INGEST = "ingest"
    SERVER = "server"
    READ = "read"


_WRITERS = frozenset({Role.INGEST, Role.SERVER})
# (method, route template) → the roles that may call it; absent: anyone
_RULES: dict[tuple[str, str], frozenset[Role]] = {
    ("POST", "/v1/crashes"): _WRITERS,
    ("POST", "/v1/sessions"): _WRITERS,
    ("POST", "/v1/scores"): frozenset({Role.SERVER}),
    ("PUT", "/v1/leaderboards/{board}"): frozenset({Role.SERVER}),
}
OPEN = frozenset({("GET", "/v1/health")})


def allowed_roles(method: str, template: str) -> frozenset[Role]:
    return _RULES.get((method, template), frozenset({Role.READ}) if method == "GET" else frozenset())


class ApiKeys(BaseModel):
    """Local keys by role (in AWS, API Gateway keys and IAM take their place), e.g.
    BLACKBOX_API_KEYS__SERVER='["…"]'."""

    ingest: list[str] = Field(default_factory=list)
    server: list[str] = Field(default_factory=list)
    read: list[str] = Field(default_factory=list)

    @property
    def configured(self) -> bool:
        return bool(self.ingest or self.server or self.read)

    def role_of(self, presented: str | None) -> Role | None:
        """The role of a presented key. Every configured key is compared, each in constant time,
        so neither the answer's timing nor an early exit says which one nearly matched."""
        if not presented:
            return None
        found: Role | None = None
        candidate = presented.encode()
        for role in Role:
            for key in getattr(self, role.value):
                if hmac.compare_digest(candidate, key.encode()):
                    found = role
        return found

    def authorize(self, presented: str | None, method: str, template: str) -> None:
        """Raises the contract's 401 (no or unknown key) or 403 (a key whose role may not)."""
        if not self.configured or (method, template) in OPEN:
            return
        role = self.role_of(presented)
        if role is None:
            raise Unauthorized(f"{method} {template} needs an API key in the {API_KEY_HEADER} header")
        if role not in allowed_roles(method, template):
            raise Forbidden(f"a {role.value} key may not {method} {template}")


def require_server_key(api_key_id: str | None, server_key_ids: list[str]) -> None:
    """In AWS, API Gateway has checked the key; whether it is a server key is decided here, from
    the key ids the deployment configured (none configured: the local gateway decided)."""
    if server_key_ids and api_key_id not in server_key_ids:
        raise Forbidden("only a server key may post scores")
