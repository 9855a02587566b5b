"""Statements written once with SQLAlchemy Core and compiled to each engine's SQL text: once per
statement and engine, or once per shape for those built from a request (functools.cache on the
builder). The text then runs on the engine's own DB-API connection (sqlite3, PyMySQL), so a call
pays for a dictionary lookup, not for compiling (100 to 400 µs a statement)."""

from __future__ import annotations

import functools
import itertools
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.dialects.mysql.pymysql import MySQLDialect_pymysql
from sqlalchemy.dialects.sqlite.base import SQLiteCompiler
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement

Engine = Literal["sqlite", "mysql"]
T = TypeVar("T")
log = logging.getLogger(__name__)
# the plain reads whose packed form came back cut short, told once a process
_cut_short: set[str] = set()


class _SqliteCompiler(SQLiteCompiler):
    def get_from_hint_text(self, table: Any, text: str | None) -> str | None:
        # SQLite's dialect drops table hints; its INDEXED BY is one, written where MySQL's go
        return text


class _Sqlite(SQLiteDialect_pysqlite):
    statement_compiler = _SqliteCompiler


# positional placeholders, as sqlite3 and PyMySQL's cursor take them
_DIALECTS: dict[Engine, Dialect] = {
    "sqlite": _Sqlite(paramstyle="qmark"),
    "mysql": MySQLDialect_pymysql(paramstyle="format"),
}


@dataclass(frozen=True)
class Compiled:
    """A statement's text for one engine, the names of its values in placeholder order, and the
    values it was written with (SQLite's dialect writes OFFSET 0 as a placeholder)."""

    text: str
    names: tuple[str, ...]
    fixed: Mapping[str, Any]

    def params(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        given = {**self.fixed, **values} if self.fixed else values
        return tuple(given[name] for name in self.names)


class Statement:
    """One statement for both engines (or one clause each, where they spell it differently),
    compiled on first use by each."""

    def __init__(self, clause: ClauseElement | Mapping[Engine, ClauseElement], *, in_order: Sequence[str] = (),
                 plain: Statement | None = None) -> None:
        """`in_order`: the names its values must come in, checked when compiled, so that rows of
        values (executemany) go in as tuples without a dictionary each. `plain`: a packed
        statement's select as it is (packed)."""
        self._clauses = clause if isinstance(clause, Mapping) else dict.fromkeys(_DIALECTS, clause)
        self._in_order = tuple(in_order)
        self._compiled: dict[Engine, Compiled] = {}
        self.plain = plain
        # the engines that answer it packed
        self.packed_on = frozenset(engine for engine, clause in self._clauses.items()
                                   if plain is not None and clause is not plain._clauses[engine])

    def on(self, engine: Engine) -> Compiled:
        found = self._compiled.get(engine)
        if found is None:
            compiled = self._clauses[engine].compile(dialect=_DIALECTS[engine])
            assert isinstance(compiled, SQLCompiler)  # statements only, never DDL
            names = tuple(compiled.positiontup or ())
            fixed = {name: compiled.binds[name].value for name in names if compiled.binds[name].value is not None}
            found = Compiled(str(compiled), names, fixed)
            if self._in_order and found.names != self._in_order:
                raise AssertionError(f"{engine} takes {found.names}, not {self._in_order}")
            self._compiled[engine] = found
        return found


# a statement with the values it runs with
Query = tuple[Statement, Mapping[str, Any]]
Rows = list[tuple[Any, ...]]


def packed(select: sa.Select[Any] | Mapping[Engine, sa.Select[Any]]) -> Statement:
    """A select of many rows that MySQL answers in one: their count and a JSON array of them.
    PyMySQL reads each row of an answer in Python, some 9 µs of CPU a row of four or five columns
    here, where json.loads reads the array in C (250 records: 0.9 ms where they took 2.8). Read
    with read_rows, whose rows hold what the JSON says: numbers and text as PyMySQL gives them, for
    the integer and text columns these selects are of, in no order. SQLite, in the process, runs
    it as it is."""
    clauses = select if isinstance(select, Mapping) else dict.fromkeys(_DIALECTS, select)
    mysql_select = clauses["mysql"]
    # each would apply to the one row of the count and array, not to the rows in it
    assert not (mysql_select._order_by_clauses or mysql_select._group_by_clauses or mysql_select._distinct
                or mysql_select._limit_clause is not None or mysql_select._offset_clause is not None), mysql_select
    return Statement({**clauses, "mysql": mysql_select.with_only_columns(
        sa.func.count(), sa.func.json_arrayagg(sa.func.json_array(*mysql_select.selected_columns)))},
        plain=Statement(clauses))


def read_rows(statement: Statement, engine: Engine, values: Mapping[str, Any],
              run: Callable[[str, tuple[Any, ...]], Rows]) -> Rows:
    """The rows of a select, through `run` (SQL text and its values → the rows): a packed one's
    unpacked, and read again as it is where the array came back cut short or not at all (MariaDB
    cuts one at group_concat_max_len, 1 MiB by default, with a warning, within a row or between
    two; MySQL answers NULL past max_allowed_packet, with a warning)."""
    compiled = statement.on(engine)
    found = run(compiled.text, compiled.params(values))
    if engine not in statement.packed_on or statement.plain is None:
        return found
    [(count, array)] = found
    try:
        rows = [tuple(row) for row in json.loads(array)] if count else []
    except (TypeError, ValueError):  # NULL, or cut within a row
        rows = []
    if len(rows) == count:
        return rows
    plain = statement.plain.on(engine).text
    if plain not in _cut_short:  # each such read costs a second one: the operator is told what to raise, once
        _cut_short.add(plain)
        log.warning("a packed read of %d rows came back cut short, and is read again row by row, as each of its kind "
                    "will be: raise group_concat_max_len (MariaDB) or max_allowed_packet (MySQL). The read: %.300s",
                    count, plain)
    return read_rows(statement.plain, engine, values, run)


def text(sql: str) -> Statement:
    """A statement only one engine runs, or one SQLAlchemy cannot say (`:name` placeholders)."""
    return Statement(sa.text(sql))


def marks(name: str, count: int) -> list[sa.BindParameter[Any]]:
    """`count` placeholders name_0, name_1, … for an IN list (see padded)."""
    return [sa.bindparam(n) for n in _names(name, count)]


def padded(count: int) -> int:
    """The IN-list size a statement is compiled for: the next power of two, so that lists of any
    length share a dozen compiled shapes (the list is padded with its last value)."""
    return 1 if count <= 1 else 1 << (count - 1).bit_length()


@functools.cache
def _names(name: str, count: int) -> tuple[str, ...]:
    return tuple(f"{name}_{i}" for i in range(count))


def listed(name: str, items: Sequence[Any]) -> dict[str, Any]:
    """The values of marks(name, padded(len(items))): the items, the last repeated."""
    return dict(zip(_names(name, padded(len(items))), repeated_last(items), strict=True))


def repeated_last(items: Sequence[T]) -> list[T]:
    """The items, the last repeated up to padded(len(items)) of them."""
    return list(itertools.islice(itertools.chain(items, itertools.repeat(items[-1])), padded(len(items))))


def one_row_each(count: int, select: Callable[[int], sa.Select[Any]]) -> Statement:
    """`count` selects of one row each in one statement (UNION ALL), the i-th answering i in its
    last column: many scalar reads a round trip. Their binds are theirs to suffix with i."""
    selects = [select(i).add_columns(sa.literal_column(str(i))) for i in range(count)]
    return Statement(selects[0] if count == 1 else sa.union_all(*selects))


def insert(table: sa.Table, columns: Sequence[str], *, keys: Sequence[str] = (), replace: Iterable[str] = (),
           add: Iterable[str] = ()) -> Statement:
    """INSERT of `columns`, values in that order. With `keys`, a row whose key is taken instead
    sets the `replace` columns to the new values and adds the new to the `add` columns; or, with
    neither, is left as it was."""
    values: dict[str, Any] = {c: sa.bindparam(c) for c in columns}
    lite = sqlite.insert(table).values(values)
    my = mysql.insert(table).values(values)
    replace, add = list(replace), list(add)
    if keys and (replace or add):
        lite = lite.on_conflict_do_update(index_elements=list(keys), set_={
            **{c: lite.excluded[c] for c in replace}, **{c: table.c[c] + lite.excluded[c] for c in add}})
        my = my.on_duplicate_key_update({
            **{c: my.inserted[c] for c in replace}, **{c: table.c[c] + my.inserted[c] for c in add}})
    elif keys:
        lite = lite.on_conflict_do_nothing(index_elements=list(keys))
        my = my.prefix_with("IGNORE")
    return Statement({"sqlite": lite, "mysql": my}, in_order=columns)
