"""MySQL through PyMySQL: a connection per thread, reused across calls (and Lambda invocations),
reconnected when the server went away; always TLS, the server's certificate verified; explicit
transactions; versioned migrations, which wait for a server that is not reachable yet."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import random
import ssl
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

import pymysql
from pymysql.constants import CR, ER
from pymysql.cursors import Cursor

from adapters.errors import Meaning
from adapters.sql import migrations
from adapters.sql.connections import PerThread
from adapters.sql.reads import Cursor as SqlCursor
from adapters.sql.reads import SqlDatabase, Transaction
from adapters.sql.statements import Rows, T
from ports.errors import UserError

MIGRATIONS = resources.files("adapters.mysql") / "migrations"
ER_BAD_DB_ERROR = 1049  # unknown database
# a connection idle longer than this is checked before use: RDS Proxy and MySQL drop idle ones
IDLE_CHECK_S = 30.0
# a read or a write that takes longer is the server gone; but not a migration's (migrate)
READ_TIMEOUT_S = 30.0
WRITE_TIMEOUT_S = 30.0
# a migration's statement waits this long for a table in use (a long transaction), rather than
# hold every query of that table behind it; then tries again, a second later, so many times
MIGRATION_LOCK_WAIT_S = 5
MIGRATION_LOCK_TRIES = 12
# the crash index has a partition for each day up to this many days ahead
DAYS_AHEAD = 7
# how long a process waits for another's migration, or its day partitions, before giving up: within
# the 600 s of AWS's custom resource that migrates, so that its own error is the one reported
TURN_WAIT_S = 540
# the one query parameter of a mysql:// URL: the CA bundle (PEM) the server's certificate must chain to
CA_PARAMETER = "ssl_ca"
# OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH and _IP_ADDRESS_MISMATCH: the certificate verifies, for
# another name or address
X509_HOST_MISMATCH = frozenset({62, 64})
URL_FORM = f"mysql://user:password@host:port/database[?{CA_PARAMETER}=/path/to/ca.pem]"
# migrations wait for the server with backoff from this delay up to that one
FIRST_RETRY_S = 0.5
MAX_RETRY_S = 10.0

# text compared exactly, as SQLite compares it: utf8mb4_bin pads the shorter side with spaces ("p1"
# = "p1 " in keys and lookups), and a database RDS makes takes the server's utf8mb4_0900_ai_ci, which
# ignores case and accents too. MySQL 8 and MariaDB name their binary NO PAD collation differently
EXACT_COLLATIONS = ("utf8mb4_0900_bin", "utf8mb4_nopad_bin")
# what migrate() does besides its SQL files, by name: a deploy runs it again when these change
CODE_MIGRATIONS = ("exact-text",)
# a request's write that lost a deadlock is tried again this often, a random wait of up to
# DEADLOCK_BACKOFF_S times the tries so far between
DEADLOCK_TRIES = 4
DEADLOCK_BACKOFF_S = 0.02

# errors that a value causes but PyMySQL raises as OperationalError (it maps only some codes to
# DataError and IntegrityError): truncated value, bad string, invalid JSON, CHECK, collation mix
_VALUE_ERRORS = {1292, 1300, 1366, 1267, 3140, 3819, 4025}

log = logging.getLogger(__name__)


def mysql_meaning(error: BaseException) -> Meaning | None:
    """MySQL's errors in the ports' words (adapters.errors). An OperationalError that no value
    caused is the server away, a lost connection, a timeout, a deadlock: worth trying again."""
    if isinstance(error, pymysql.err.DataError | pymysql.err.IntegrityError):
        return Meaning.VALUE
    if isinstance(error, pymysql.err.OperationalError):
        return Meaning.VALUE if error.args and error.args[0] in _VALUE_ERRORS else Meaning.UNAVAILABLE
    if isinstance(error, pymysql.err.InterfaceError | ConnectionError | TimeoutError):
        return Meaning.UNAVAILABLE
    return None


@dataclass(frozen=True)
class MysqlTarget:
    """Where a mysql:// URL points, and which CA vouches for the server (None: the system's trust
    store). TLS cannot be turned off: the URL takes no other parameter."""

    host: str
    port: int
    user: str
    password: str
    database: str
    ca_file: str | None

    @classmethod
    def parse(cls, url: str) -> MysqlTarget:
        parts = urlsplit(url)
        if parts.scheme != "mysql":  # the URL holds a password: not repeated in the error
            raise ValueError(f"expected {URL_FORM}, got a {parts.scheme or 'schemeless'} URL")
        query = parse_qs(parts.query, keep_blank_values=True)
        if set(query) - {CA_PARAMETER} or any(len(values) != 1 or not values[0] for values in query.values()):
            raise ValueError(f"expected {URL_FORM} (TLS is always on), got parameters {sorted(query)}")
        return cls(host=parts.hostname or "127.0.0.1", port=parts.port or 3306, user=unquote(parts.username or "root"),
                   password=unquote(parts.password or ""), database=parts.path.lstrip("/") or "blackbox",
                   ca_file=query[CA_PARAMETER][0] if query else None)


class TargetProvider(Protocol):
    """Where to connect and as whom, asked for each new connection: credentials from a secret that
    is rotated may change between two answers. `force`: the server refused the credentials of the
    last answer, so a cached one is stale (a rotation changed the password)."""

    def __call__(self, *, force: bool = False) -> MysqlTarget: ...


def fixed(url: str) -> TargetProvider:
    """The embedded and services profiles' target: one mysql:// URL, nothing to fetch again."""
    target = MysqlTarget.parse(url)

    def provide(*, force: bool = False) -> MysqlTarget:
        return target

    return provide


def with_database(url: str, database: str) -> str:
    """The same server, user and CA, another database."""
    return urlsplit(url)._replace(path=f"/{database}").geturl()


def tls_context(ca_file: str | None) -> ssl.SSLContext:
    """Certificate and host name verified, against `ca_file` or else the system's trust store. The
    aws profile needs no file: RDS Proxy presents ACM certificates that chain to Amazon Root CA 1
    (docs.aws.amazon.com/AmazonRDS/latest/UserGuide/rds-proxy.howitworks.html#rds-proxy-security.tls),
    which the Lambda runtime's trust store holds. Given a context, PyMySQL (>= 1.2) requires TLS:
    a server that does not offer it is refused, never spoken to in plaintext."""
    return ssl.create_default_context(cafile=ca_file)


def _refused(exc: pymysql.err.OperationalError, t: MysqlTarget) -> UserError | None:
    """What to fix where MySQL refuses the credentials of a URL, or its certificate does not verify
    (neither waited out); None for another error."""
    if exc.args[0] == ER.ACCESS_DENIED_ERROR:
        return UserError(f"MySQL at {t.host}:{t.port} refused user {t.user} and its password",
                         "fix them in BLACKBOX_MYSQL_URL (mysql://user:password@host:port/database)")
    verification: BaseException | None = exc
    while verification is not None and not isinstance(verification, ssl.SSLCertVerificationError):
        verification = verification.__cause__ or verification.__context__
    if not isinstance(verification, ssl.SSLCertVerificationError):
        return None
    if verification.verify_code in X509_HOST_MISMATCH:
        return UserError(str(exc.args[1]), "give BLACKBOX_MYSQL_URL a host name its certificate holds")
    return UserError(str(exc.args[1]), f"name the CA that signed its certificate in BLACKBOX_MYSQL_URL "
                     f"(…/database?{CA_PARAMETER}=/path/ca.pem)")


class MysqlDatabase(SqlDatabase):
    """`target`: a mysql:// URL, or a provider asked for each new connection (adapters.aws reads it
    from a rotated secret). The database and the CA are its first answer's."""

    ENGINE = "mysql"

    def __init__(self, target: str | TargetProvider, *, given: bool | None = None) -> None:
        self._provider = fixed(target) if isinstance(target, str) else target
        # credentials given (a URL, the services profile's settings), not fetched from a secret: a
        # refusal of them stands (in AWS, RDS Proxy refuses clients until its target registers)
        self._given = isinstance(target, str) if given is None else given
        first = self._provider()
        self.database = first.database
        try:
            self._tls = tls_context(first.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise UserError(f"the CA file {first.ca_file} (BLACKBOX_MYSQL_URL's {CA_PARAMETER}) cannot be read "
                            f"({getattr(exc, 'strerror', None) or exc})",
                            "name a PEM file this user can read, by its absolute path") from None
        self._connections = PerThread(lambda: self._connect(self.database))

    def _connect(self, database: str | None, migrating: bool = False) -> pymysql.connections.Connection[Cursor]:
        """With the provider's credentials; refused those, with the ones it fetches afresh, once: a
        connection open before a rotation keeps working, a new one needs the new password."""
        target = self._provider()
        try:
            return self._dial(target, database, migrating)
        except pymysql.err.OperationalError as exc:
            if exc.args[0] != ER.ACCESS_DENIED_ERROR:
                raise
            fresh = self._provider(force=True)
            if fresh == target:  # nothing rotated (or nothing to fetch): the refusal stands
                raise
        log.info("MySQL refused the credentials of %s; dialing again with those fetched afresh", target.user)
        return self._dial(fresh, database, migrating)

    def _dial(self, t: MysqlTarget, database: str | None, migrating: bool) -> pymysql.connections.Connection[Cursor]:
        try:
            return pymysql.connect(
                host=t.host, port=t.port, user=t.user, password=t.password, database=database, ssl=self._tls,
                charset="utf8mb4", autocommit=True, connect_timeout=5,
                read_timeout=None if migrating else READ_TIMEOUT_S,
                write_timeout=WRITE_TIMEOUT_S,
            )
        except pymysql.err.OperationalError as exc:
            if isinstance(exc.__context__, ssl.SSLCertVerificationError):
                trusted = t.ca_file or "the system trust store"
                raise pymysql.err.OperationalError(
                    CR.CR_SSL_CONNECTION_ERROR, f"TLS to MySQL at {t.host}:{t.port}: its certificate does not "
                    f"verify against {trusted} ({exc.__context__.verify_message})") from exc
            raise

    def wait_until_reachable(self, within_s: float) -> None:
        """Returns once the server takes a connection, trying again with backoff for `within_s`
        seconds: RDS Proxy refuses connections until its target has registered, which can be minutes
        after CloudFormation created it and started the migrations. A certificate that does not verify
        is not waited out."""
        deadline = time.monotonic() + within_s
        delay, attempts = FIRST_RETRY_S, 0
        while True:
            attempts += 1
            try:
                self._connect(None).close()
                return
            except pymysql.err.OperationalError as exc:
                if self._given and (refused := _refused(exc, self._provider())) is not None:
                    raise refused from exc
                if exc.args[0] == CR.CR_SSL_CONNECTION_ERROR:
                    raise
                left = deadline - time.monotonic()
                if left <= 0:
                    t = self._provider()
                    raise TimeoutError(
                        f"MySQL at {t.host}:{t.port} took no connection in {within_s:g} s "
                        f"({attempts} attempts); the last error: {exc}") from exc
                log.warning("MySQL not reachable yet, trying again in %.1f s: %s", min(delay, left), exc)
                time.sleep(min(delay, left))
                delay = min(delay * 2, MAX_RETRY_S)

    def connection(self) -> pymysql.connections.Connection[Cursor]:
        conn, idle = self._connections.get()
        if not conn.open:  # a network error closed it (the server restarted, say): start afresh
            conn = self._connections.renew()
        elif IDLE_CHECK_S < idle < float("inf"):
            try:
                conn.ping(reconnect=False)
            except pymysql.err.Error:
                conn = self._connections.renew()
        return conn

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        with _transaction_on(self.connection()) as t:
            yield t

    def in_transaction(self, work: Callable[[Transaction], T]) -> T:
        # InnoDB rolls a deadlock's victim back whole: running it again is running it once
        for attempt in range(1, DEADLOCK_TRIES):
            try:
                with self.transaction() as t:
                    return work(t)
            except pymysql.err.OperationalError as exc:
                if exc.args[0] != ER.LOCK_DEADLOCK:
                    raise
                time.sleep(random.uniform(0, DEADLOCK_BACKOFF_S * attempt))  # apart, not in step again
        return super().in_transaction(work)  # the last try

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """InnoDB's consistent read: every read of the transaction sees the state at its start."""
        conn = self.connection()
        with conn.cursor() as cursor:
            cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        try:
            yield
        finally:
            conn.rollback()  # nothing to keep; and a connection that broke meanwhile raises its own error

    def run(self, sql: str, params: Sequence[Any]) -> Rows:
        conn = self.connection()
        escape = conn.escape
        # what PyMySQL's execute(sql, params) sends, with each int written here: its escape() takes
        # three calls for one (1.2 against 0.3 ms for a read of a thousand numbers here)
        text = sql % tuple(str(p) if type(p) is int else escape(p) for p in params)
        with conn.cursor() as cursor:
            cursor.execute(text)
            return list(cursor.fetchall())

    def drop_day_partitions(self, before_ms: int) -> int:
        """Drops the day partitions that end at or before `before_ms`; returns the rows they held."""
        with self._in_turn("day-partitions") as conn, conn.cursor() as cursor:
            old = sorted(name for name, bound in self._day_partitions(cursor).items() if bound <= before_ms)
            if not old:
                return 0
            cursor.execute(f"SELECT COUNT(*) FROM reports PARTITION ({', '.join(old)})")
            (rows,) = cursor.fetchone() or (0,)
            _patiently(cursor, f"ALTER TABLE reports DROP PARTITION {', '.join(old)}")
            return int(rows)

    def ping(self) -> None:
        with self.connection().cursor() as cursor:
            cursor.execute("SELECT 1")

    def close(self) -> None:
        self._connections.close_all()

    def migrate(self, days_ahead: int = DAYS_AHEAD, wait_s: float = 0.0) -> list[str]:
        """Applies the migrations not yet applied, in order; returns their names. Then makes sure the
        index has a partition for each day from today to `days_ahead`. Waits up to `wait_s` seconds
        for the server to take a connection first."""
        self.wait_until_reachable(wait_s)
        self._create_database()
        applied: list[str] = []
        with self._in_turn("migrations") as conn:
            with conn.cursor() as cursor:
                exact = _exact_collation(cursor)
                _patiently(cursor, f"ALTER DATABASE `{self.database}` CHARACTER SET utf8mb4 COLLATE {exact}")
                cursor.execute(migrations.CREATE_TABLE)
                cursor.execute(migrations.SELECT_APPLIED)
                done = {row[0] for row in cursor.fetchall()}
            for migration in migrations.index_migrations(MIGRATIONS):
                if migration.name in done:
                    continue
                # DDL commits implicitly in MySQL: a migration cut off midway runs again, where a
                # column or an index it added already is taken as added (a shared one cannot say IF
                # NOT EXISTS)
                with _transaction_on(conn) as t:
                    for statement in migration.statements:
                        try:
                            _patiently(t.cursor, statement)
                        except pymysql.err.OperationalError as exc:
                            if exc.args[0] not in (ER.DUP_FIELDNAME, ER.DUP_KEYNAME):
                                raise
                    t.execute(migrations.RECORD, {"version": migration.name})
                applied.append(migration.name)
            with conn.cursor() as cursor:
                self._compare_exactly(cursor, exact)
        self.ensure_day_partitions(days_ahead)
        return applied

    @contextmanager
    def _in_turn(self, work: str) -> Iterator[pymysql.connections.Connection[Cursor]]:
        """A connection of its own, holding this work's turn (_turn) for the block: no read timeout,
        as a turn may wait minutes for another process's and a large index's rebuild takes as long;
        a short wait for a table in use, tried again (_patiently), so that no query waits long
        behind its DDL; and closed afterwards, so that no pooled connection keeps a named lock's
        session (RDS Proxy pins a connection that took one)."""
        with (self._connect(self.database, migrating=True) as conn, conn.cursor() as cursor,
              _turn(cursor, work, self.database)):
            cursor.execute(f"SET SESSION lock_wait_timeout = {MIGRATION_LOCK_WAIT_S}")
            yield conn

    def _compare_exactly(self, cursor: Cursor, exact: str) -> None:
        """Every table's text in the exact collation (CODE_MIGRATIONS): those the engine's migrations
        made in utf8mb4_bin, and any a release before this made otherwise (rebuilt once, then none)."""
        cursor.execute("SELECT DISTINCT table_name FROM information_schema.columns WHERE table_schema = %s "
                       "AND collation_name <> %s ORDER BY table_name", (self.database, exact))
        for (table,) in cursor.fetchall():
            _patiently(cursor, f"ALTER TABLE `{table}` CONVERT TO CHARACTER SET utf8mb4 COLLATE {exact}")

    def _create_database(self) -> None:
        """Only when it is missing: a user granted just its own database may not create one."""
        try:
            self.connection()
            return
        except pymysql.err.OperationalError as exc:
            if exc.args[0] != ER_BAD_DB_ERROR:
                raise
        with self._connect(None) as conn, conn.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE IF NOT EXISTS `{self.database}` CHARACTER SET utf8mb4 "
                           f"COLLATE {_exact_collation(cursor)}")

    def _day_partitions(self, cursor: SqlCursor) -> dict[str, int]:
        """The reports table's day partitions and their upper bounds (p_future excluded)."""
        cursor.execute(
            "SELECT partition_name, partition_description FROM information_schema.partitions "
            "WHERE table_schema = %s AND table_name = 'reports' AND partition_name <> 'p_future'",
            (self.database,),
        )
        return {name: int(bound) for name, bound in cursor.fetchall()}

    def ensure_day_partitions(self, days_ahead: int) -> None:
        with self._in_turn("day-partitions") as conn, conn.cursor() as cursor:
            highest = max(self._day_partitions(cursor).values(), default=-1)
            today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
            new = []
            for n in range(days_ahead + 1):
                day = today + timedelta(days=n)
                bound = int((day + timedelta(days=1)).timestamp() * 1000)
                if bound > highest:  # bounds must grow; a day already covered (or purged) is skipped
                    new.append(f"PARTITION p{day:%Y%m%d} VALUES LESS THAN ({bound})")
            if new:
                _patiently(cursor, "ALTER TABLE reports REORGANIZE PARTITION p_future INTO "
                                   f"({', '.join(new)}, PARTITION p_future VALUES LESS THAN MAXVALUE)")


def _exact_collation(cursor: Cursor) -> str:
    cursor.execute("SELECT collation_name FROM information_schema.collations WHERE collation_name IN (%s, %s)",
                   EXACT_COLLATIONS)
    found = {row[0] for row in cursor.fetchall()}
    for name in EXACT_COLLATIONS:
        if name in found:
            return name
    raise RuntimeError(f"MySQL here has none of {', '.join(EXACT_COLLATIONS)}: MySQL 8.0.17 or MariaDB 10.2 on "
                       "is needed")


@contextmanager
def _turn(cursor: SqlCursor, work: str, database: str) -> Iterator[None]:
    """Holds MySQL's named lock for this work on this database, in the cursor's session, while the
    block runs: processes that would do it at once (serves starting together, each consumers
    machine's hourly job) take turns, each seeing what the one before did. A process that dies lets
    the lock go with its connection."""
    # MySQL takes names of 64 characters at most, and a database's name may be as long itself
    name = f"blackbox:{work}:{hashlib.sha1(database.encode()).hexdigest()[:32]}"

    def took(wait_s: float) -> bool:
        cursor.execute("SELECT GET_LOCK(%s, %s)", (name, wait_s))
        return bool(cursor.fetchall()[0][0] == 1)

    if not took(0):
        log.info("another process is doing the %s of database %s; waiting for it to end", work, database)
        if not took(TURN_WAIT_S):
            raise TimeoutError(f"another process has held MySQL's lock on the {work} of database {database} "
                               f"for {TURN_WAIT_S} s; if none is running, try again")
    try:
        yield
    finally:
        # a connection that broke meanwhile let the lock go, and its error is the one to raise
        with contextlib.suppress(pymysql.err.Error):
            cursor.execute("SELECT RELEASE_LOCK(%s)", (name,))
            cursor.fetchall()


@contextmanager
def _transaction_on(conn: pymysql.connections.Connection[Cursor]) -> Iterator[Transaction]:
    conn.begin()
    try:
        with conn.cursor() as cursor:
            yield Transaction(cursor, MysqlDatabase.ENGINE)
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


def _patiently(cursor: SqlCursor, statement: str) -> None:
    """A schema change's statement (a migration's, a day partition's), tried again while it waits too
    long for a table in use."""
    for attempt in range(1, MIGRATION_LOCK_TRIES + 1):
        try:
            cursor.execute(statement)
            return
        except pymysql.err.OperationalError as exc:
            if exc.args[0] != ER.LOCK_WAIT_TIMEOUT or attempt == MIGRATION_LOCK_TRIES:
                raise
            log.warning("a schema change waited %d s for a table in use (try %d of %d): %s", MIGRATION_LOCK_WAIT_S,
                        attempt, MIGRATION_LOCK_TRIES, statement[:80])
            time.sleep(1)
