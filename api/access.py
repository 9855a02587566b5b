"""Who may call what. An ingest key may post crashes and sessions; a title's ingest key only for its
own skus; a server key may also post scores and set up leaderboards; reading needs a read key (IAM
in AWS); health is open. Keys are compared in constant time and never logged."""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator
from pydantic_core import PydanticCustomError

from ports.errors import Forbidden, Unauthorized
from ports.limits import Sku

API_KEY_HEADER = "x-api-key"


class Role(StrEnum):
    INGEST = "ingest"
    SERVER = "server"
    READ = "read"


WRITERS = frozenset({Role.INGEST, Role.SERVER})
SERVER = frozenset({Role.SERVER})
READERS = frozenset({Role.READ})
# a game server shows the ranks it posts, without the read key, which reads every crash report too
BOARD_READERS = frozenset({Role.READ, Role.SERVER})


def _presentable(key: str) -> str:
    """A key a header can present as it is: a header's value is read without the spaces around it,
    and one of no characters is no key."""
    if not key or not all("!" <= c <= "~" for c in key):
        raise PydanticCustomError("key", "a key is one or more visible ASCII characters (no spaces)")
    return key


Key = Annotated[str, AfterValidator(_presentable)]


class TitleKey(BaseModel):
    """An ingest key of one title: it may post only these skus (as a title's API Gateway key)."""

    model_config = ConfigDict(extra="forbid")

    key: Key
    skus: list[Sku] = Field(min_length=1)


# a title key's errors said as its own, not beside a plain key's "Input should be a valid string"
IngestEntry = Annotated[Annotated[Key, Tag("plain")] | Annotated[TitleKey, Tag("title")],
                        Discriminator(lambda entry: "plain" if isinstance(entry, str) else "title")]


@dataclass(frozen=True)
class Caller:
    role: Role
    key_id: str
    """What API Gateway calls the key's id: names the key to the handlers without revealing it."""


class ApiKeys(BaseModel):
    """Local keys by role (in AWS, API Gateway keys and IAM take their place), e.g.
    BLACKBOX_API_KEYS__SERVER='["…"]', or for titles
    BLACKBOX_API_KEYS__INGEST='[{"key": "…", "skus": ["skyrift:pc"]}, "an unscoped key"]'."""

    ingest: list[IngestEntry] = Field(default_factory=list)
    server: list[Key] = Field(default_factory=list)
    read: list[Key] = Field(default_factory=list)

    @field_validator("server", "read", mode="before")
    @classmethod
    def _plain_keys(cls, entries: Any) -> Any:
        """A title key among server or read keys: said as such, not as "Input should be a valid string"."""
        if isinstance(entries, list) and any(isinstance(entry, dict) for entry in entries):
            raise PydanticCustomError("title_key", "title keys ({key, skus}) are for BLACKBOX_API_KEYS__INGEST "
                                      "only; a server or read key is a string")
        return entries

    @field_validator("ingest", "server", "read")
    @classmethod
    def _once(cls, entries: list[str | TitleKey]) -> list[str | TitleKey]:
        """identify() gives a key one entry: listed again (a title key also unscoped, or with
        other skus), all but one would be silently dropped."""
        keys = [_key_of(entry) for entry in entries]
        if len(set(keys)) < len(keys):
            raise PydanticCustomError("key_twice", "a key is listed twice; list each key once")  # not which: a secret
        return entries

    @property
    def configured(self) -> bool:
        return bool(self.ingest or self.server or self.read)

    def shared(self) -> list[tuple[Role, Role]]:
        """The pairs of roles that list the same key: identify() can give it one role only, so a key
        under two would silently lose the other."""
        roles_of: dict[str, list[Role]] = {}
        for caller, entry in self._entries():
            roles_of.setdefault(_key_of(entry), []).append(caller.role)
        return sorted({(roles[0], other) for roles in roles_of.values() for other in roles[1:]})

    def _entries(self) -> Iterable[tuple[Caller, str | TitleKey]]:
        for role in Role:
            for position, entry in enumerate(getattr(self, role.value)):
                yield Caller(role, f"{role.value}-{position}"), entry

    @property
    def key_skus(self) -> dict[str, list[str]]:
        """Key id → the skus it may post, for the title keys: what BLACKBOX_KEY_SKUS is in AWS."""
        return {caller.key_id: entry.skus for caller, entry in self._entries() if isinstance(entry, TitleKey)}

    def identify(self, presented: str | None) -> Caller | None:
        """Who presents this key. Every configured key is compared, each in constant time, so
        neither the answer's timing nor an early exit says which one nearly matched."""
        if not presented:
            return None
        found: Caller | None = None
        candidate = presented.encode()
        for caller, entry in self._entries():
            if hmac.compare_digest(candidate, _key_of(entry).encode()):
                found = caller
        return found

    def authorize(self, presented: str | None, roles: frozenset[Role] | None, what: str,
                  where: str = f"the {API_KEY_HEADER} header") -> Caller | None:
        """The caller, or the contract's 401 (no or unknown key) or 403 (a key whose role is not
        among `roles`, those of the route `what`, e.g. "POST /v1/scores", whose key is in `where`). None
        where no key is needed: roles None is a route open to anyone."""
        if not self.configured or roles is None:
            return None
        caller = self.identify(presented)
        if caller is None:
            raise Unauthorized(f"the key in {where} is none of this server's keys" if presented
                               else f"{what} needs an API key in {where}")
        if caller.role not in roles:
            raise Forbidden(f"this key, of the {caller.role.value} role, may not {what}")
        return caller


def _key_of(entry: str | TitleKey) -> str:
    return entry.key if isinstance(entry, TitleKey) else entry


def require_server_key(api_key_id: str | None, server_key_ids: list[str]) -> None:
    """In AWS, API Gateway has checked the key; whether it is a server key is decided here, from
    the key ids the deployment configured (none configured: the local gateway decided)."""
    if server_key_ids and api_key_id not in server_key_ids:
        raise Forbidden("only a server key may post scores")
