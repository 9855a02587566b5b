"""Adapters speak the ports' errors (adapters.errors): an engine that did not answer is
StoreUnavailable, a value it refused is ValueRefused, anything else is raised as it was. The engines'
errors here are real ones where an engine runs in-process or a refused connection makes them."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import couchbase.exceptions
import pymysql
import pytest

from adapters.couchbase.documents import couchbase_meaning
from adapters.embedded.sqlite import SqliteFile, sqlite_meaning
from adapters.errors import Meaning, port_errors
from adapters.mysql.database import MysqlDatabase, mysql_meaning
from adapters.mysql.index import MysqlCrashIndex
from ports import ReportFilter
from ports.errors import StoreUnavailable, ValueRefused


@port_errors("index", sqlite_meaning)
class Table:
    """A stand-in adapter on a real SQLite file."""

    def __init__(self, path: Path, timeout_s: float = 0.0) -> None:
        self.conn = sqlite3.connect(path, timeout=timeout_s, isolation_level=None, check_same_thread=False)
        self.conn.execute("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v TEXT NOT NULL)")

    def put(self, key: str, value: str | None) -> None:
        self.conn.execute("INSERT INTO t VALUES (?, ?)", (key, value))

    def broken_statement(self) -> None:
        self.conn.execute("SELEC 1")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.conn.execute("BEGIN IMMEDIATE")
        yield
        self.conn.execute("COMMIT")

    def _private(self) -> None:
        self.conn.execute("INSERT INTO t VALUES ('k', NULL)")


def test_a_value_the_engine_refused_is_value_refused_with_the_engine_error_as_cause(tmp_path):
    table = Table(tmp_path / "db")
    with pytest.raises(ValueRefused, match=r"^IntegrityError: NOT NULL constraint failed") as refused:
        table.put("k", None)
    assert isinstance(refused.value.__cause__, sqlite3.IntegrityError)


def test_a_locked_file_is_store_unavailable_and_the_client_hears_only_the_port(tmp_path):
    holder = sqlite3.connect(tmp_path / "db", isolation_level=None)
    table = Table(tmp_path / "db")
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    with pytest.raises(StoreUnavailable) as away:
        table.put("k", "v")
    assert away.value.status == 503 and away.value.message == "the index store did not answer; try again"
    assert isinstance(away.value.__cause__, sqlite3.OperationalError)
    holder.execute("ROLLBACK")
    table.put("k", "v")  # and the same call succeeds once the lock is gone


def test_a_transaction_the_adapter_hands_out_translates_its_begin(tmp_path):
    holder = sqlite3.connect(tmp_path / "db", isolation_level=None)
    table = Table(tmp_path / "db")
    holder.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreUnavailable), table.transaction():
        pytest.fail("the transaction began while another held the lock")


def test_a_bug_is_raised_as_it_was_and_private_methods_are_left_alone(tmp_path):
    table = Table(tmp_path / "db")
    with pytest.raises(sqlite3.OperationalError, match="syntax error"):
        table.broken_statement()  # not "unavailable": retrying a broken statement cannot help
    with pytest.raises(sqlite3.IntegrityError):
        table._private()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_mysql_server_that_is_not_there_is_store_unavailable():
    index = MysqlCrashIndex(MysqlDatabase(f"mysql://u:p@127.0.0.1:{closed_port()}/blackbox"))
    with pytest.raises(StoreUnavailable) as away:
        index.find(ReportFilter(sku="s", limit=1))
    assert isinstance(away.value.__cause__, pymysql.err.OperationalError) and away.value.port == "index"


@pytest.mark.parametrize(("error", "meaning"), [
    (pymysql.err.DataError(1406, "Data too long"), Meaning.VALUE),
    (pymysql.err.IntegrityError(1062, "Duplicate entry"), Meaning.VALUE),
    (pymysql.err.OperationalError(1366, "Incorrect string value"), Meaning.VALUE),
    (pymysql.err.OperationalError(2003, "Can't connect to MySQL server"), Meaning.UNAVAILABLE),
    (pymysql.err.OperationalError(1213, "Deadlock found when trying to get lock"), Meaning.UNAVAILABLE),
    (pymysql.err.InterfaceError(0, ""), Meaning.UNAVAILABLE),
    (pymysql.err.ProgrammingError(1064, "You have an error in your SQL syntax"), None),
])
def test_mysql_errors_by_meaning(error, meaning):
    assert mysql_meaning(error) is meaning


@pytest.mark.parametrize(("error", "meaning"), [
    (couchbase.exceptions.InvalidArgumentException("document key too long"), Meaning.VALUE),
    (couchbase.exceptions.ValueFormatException("not bytes"), Meaning.VALUE),
    (couchbase.exceptions.UnAmbiguousTimeoutException("timed out"), Meaning.UNAVAILABLE),
    (couchbase.exceptions.ServiceUnavailableException("no kv node"), Meaning.UNAVAILABLE),
    (couchbase.exceptions.TemporaryFailException("busy"), Meaning.UNAVAILABLE),
    (couchbase.exceptions.AuthenticationException("wrong password"), None),
])
def test_couchbase_errors_by_meaning(error, meaning):
    assert couchbase_meaning(error) is meaning


def test_a_write_whose_commit_fails_leaves_no_transaction_open(tmp_path: Path):
    """Found by review: a COMMIT that failed (here a deferred foreign key, checked at COMMIT) left
    the thread's connection inside its transaction, so each later write of that thread failed at
    its BEGIN, an error no port meaning covers."""
    db = SqliteFile(tmp_path / "log.sqlite", "log")
    db.connection().execute("PRAGMA foreign_keys=ON")
    with pytest.raises(sqlite3.IntegrityError), db.write() as conn:
        conn.execute("CREATE TEMP TABLE parent (id INTEGER PRIMARY KEY)")
        conn.execute("CREATE TEMP TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)")
        conn.execute("INSERT INTO child VALUES (1)")
    assert not db.connection().in_transaction
    with db.write() as conn:
        conn.execute("CREATE TEMP TABLE later (x)")
