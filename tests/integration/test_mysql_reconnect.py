"""A MySQL connection that broke (the server restarted, a proxy dropped it) is replaced on the
next call instead of failing every call after it."""

from __future__ import annotations

import pymysql
import pytest

from tests.services import mysql_database, namespace

pytestmark = pytest.mark.services  # on the engines of scripts/services


def test_a_killed_connection_is_replaced_on_the_next_call():
    with mysql_database(namespace()) as database:
        database.ping()
        victim = database.connection().thread_id()
        # the same thread's connection kills itself
        with database.connection().cursor() as cursor, pytest.raises(pymysql.err.OperationalError):
            cursor.execute(f"KILL {victim}")
        with pytest.raises(pymysql.err.Error):
            database.ping()  # the call that finds it broken fails: its caller retries
        database.ping()  # the next one has a new connection
        assert database.connection().thread_id() != victim
