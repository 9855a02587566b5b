"""A password rotated on the server (as RDS's single-user rotation does) while a container holds the
old one: its open connection keeps working, and its next new connection, refused the cached
password, asks the provider once more with force and signs in with the new one."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pymysql
import pytest
from pymysql.constants import ER

from adapters.mysql.database import MysqlDatabase, MysqlTarget
from tests.services import namespace, settings

pytestmark = pytest.mark.services  # on the engines of scripts/services


class CachedSecret:
    """A TargetProvider as adapters.aws is one: the password it read last, until asked with force,
    when it reads what the secret holds now (`fetches_afresh=False`: a provider that cannot)."""

    def __init__(self, target: MysqlTarget, fetches_afresh: bool) -> None:
        self.secret = target  # what Secrets Manager holds
        self._cached = target
        self._fetches_afresh = fetches_afresh
        self.forced = 0

    def __call__(self, *, force: bool = False) -> MysqlTarget:
        if force:
            self.forced += 1
            if self._fetches_afresh:
                self._cached = self.secret
        return self._cached


@pytest.fixture
def admin() -> Iterator[MysqlDatabase]:
    database = MysqlDatabase(settings().mysql_url)
    yield database
    database.close()


@pytest.fixture
def throwaway_user(admin: MysqlDatabase) -> Iterator[MysqlTarget]:
    """A user of its own, granted nothing: it signs in to information_schema, which any user may read."""
    user, password = namespace(), secrets.token_urlsafe(16)
    with admin.connection().cursor() as cursor:
        cursor.execute("CREATE USER %s@'127.0.0.1' IDENTIFIED BY %s", (user, password))
    yield replace(MysqlTarget.parse(settings().mysql_url), user=user, password=password, database="information_schema")
    with admin.connection().cursor() as cursor:
        cursor.execute("DROP USER IF EXISTS %s@'127.0.0.1'", (user,))


def signed_in_as(database: MysqlDatabase) -> str:
    with database.connection().cursor() as cursor:
        cursor.execute("SELECT CURRENT_USER()")
        (user,) = cursor.fetchone() or ("",)
        return str(user)


def in_a_new_thread(database: MysqlDatabase) -> str:
    """The user a new connection signs in as: a new thread opens one (adapters.sql.connections)."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(signed_in_as, database).result()


@pytest.mark.parametrize("fetches_afresh", [True, False])
def test_a_new_connection_after_a_rotation_signs_in_with_the_new_password(
        admin: MysqlDatabase, throwaway_user: MysqlTarget, fetches_afresh: bool):
    provider = CachedSecret(throwaway_user, fetches_afresh)
    database = MysqlDatabase(provider)
    try:
        user = f"{throwaway_user.user}@127.0.0.1"
        assert signed_in_as(database) == user and provider.forced == 0
        new_password = secrets.token_urlsafe(16)
        with admin.connection().cursor() as cursor:
            cursor.execute("ALTER USER %s@'127.0.0.1' IDENTIFIED BY %s", (throwaway_user.user, new_password))
        provider.secret = replace(throwaway_user, password=new_password)
        assert signed_in_as(database) == user  # the open connection is not signed out
        if fetches_afresh:
            assert in_a_new_thread(database) == user
            assert provider.forced == 1
            assert in_a_new_thread(database) == user and provider.forced == 1  # the fresh password is kept
        else:
            with pytest.raises(pymysql.err.OperationalError) as refused:
                in_a_new_thread(database)
            assert refused.value.args[0] == ER.ACCESS_DENIED_ERROR and provider.forced == 1
    finally:
        database.close()


def test_a_refusal_is_not_dialed_again_when_nothing_rotated(throwaway_user: MysqlTarget,
                                                          monkeypatch: pytest.MonkeyPatch):
    wrong = replace(throwaway_user, password="not-" + throwaway_user.password)
    database = MysqlDatabase(CachedSecret(wrong, fetches_afresh=True))
    dial = database._dial
    dialed: list[MysqlTarget] = []
    monkeypatch.setattr(database, "_dial", lambda target, *rest: (dialed.append(target), dial(target, *rest))[1])
    with pytest.raises(pymysql.err.OperationalError) as refused:
        database._connect(None)
    assert refused.value.args[0] == ER.ACCESS_DENIED_ERROR and dialed == [wrong]  # the same password, once
