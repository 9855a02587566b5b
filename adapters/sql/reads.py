"""What the SQL adapters read alike on SQLite and MySQL, written once: each engine's database runs
a statement (adapters.sql.statements) in its own SQL, and its adapters add only what differs, their
transactions and the statements an engine plans its own way."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, ClassVar, Protocol

import sqlalchemy as sa

from adapters.sql import ranking as ranking_sql
from adapters.sql.queries import (
    APPLIED_OFFSET,
    APPLIED_OFFSET_FOR_UPDATE,
    AWAIT_SYMBOLS,
    AWAITING,
    GET_REPORT,
    PURGE_CHUNK,
    SESSION_COUNTS,
    SET_PROCESSED,
    SET_SIGNATURE,
    STORE_EVENTS,
    STORE_OFFSET,
    applied,
    applied_events_rows,
    applied_range,
    body_hashes,
    bucket_counts,
    check_offset,
    covered,
    covered_query,
    crash_counts_query,
    crash_groups,
    crash_groups_query,
    find_query,
    forget_awaiting,
    offset_values,
    origins,
    processed_values,
    report_from_row,
    report_ids,
    seen_events,
    skus_seen,
    stored_offset,
)
from adapters.sql.statements import Engine, Query, Rows, Statement, T, read_rows
from ports import (
    Applied,
    BoardSettings,
    BoardUpdate,
    Checkpoint,
    CrashGroup,
    Entry,
    IndexedReport,
    NodeRange,
    Order,
    Position,
    Processed,
    ReportFilter,
    ReportOrigin,
    SkuSeen,
)
from ports.errors import BansLifted
from ports.limits import INT64_MAX
from ports.timeutil import now_ms
from ranking.seasons import season_key


class Cursor(Protocol):
    """What sqlite3's and PyMySQL's cursors both do (DB-API 2)."""

    @property
    def rowcount(self) -> int: ...

    def execute(self, query: Any, args: Any = ..., /) -> Any: ...
    def executemany(self, query: Any, args: Any, /) -> Any: ...
    def fetchall(self) -> Any: ...


class Transaction:
    """Statements run in one of an engine's transactions."""

    def __init__(self, cursor: Cursor, engine: Engine) -> None:
        self.cursor = cursor
        self._engine = engine

    def execute(self, statement: Statement, values: Mapping[str, Any]) -> int:
        """Runs it; the rows it changed."""
        compiled = statement.on(self._engine)
        self.cursor.execute(compiled.text, compiled.params(values))
        return self.cursor.rowcount

    def rows(self, statement: Statement, values: Mapping[str, Any]) -> Rows:
        def run(sql: str, params: tuple[Any, ...]) -> Rows:
            self.cursor.execute(sql, params)
            return list(self.cursor.fetchall())
        return read_rows(statement, self._engine, values, run)

    def execute_rows(self, statement: Statement, rows: Sequence[tuple[Any, ...]]) -> None:
        """Runs it once for each row of values, in the order of its `in_order` (an insert's columns)."""
        if rows:
            self.cursor.executemany(statement.on(self._engine).text, rows)


class SqlDatabase(ABC):
    """An engine's database: its reads, its transactions, and the consumers' bookkeeping in them."""

    ENGINE: ClassVar[Engine]

    @abstractmethod
    def run(self, sql: str, params: Sequence[Any]) -> Rows:
        """Runs SQL text of this engine's on this thread's connection."""

    @abstractmethod
    def transaction(self) -> AbstractContextManager[Transaction]:
        """A write transaction, committed when the block ends and rolled back when it raises."""

    @abstractmethod
    def close(self) -> None:
        """Closes this process's connections (a later call opens new ones)."""

    def in_transaction(self, work: Callable[[Transaction], T]) -> T:
        """`work` in a transaction of its own, which an engine may run again in a fresh one when
        the first was rolled back whole (MySQL's deadlock victim): a request's write, not a consumer's
        (their batches are retried whole, by the poller or the event source mapping)."""
        with self.transaction() as t:
            return work(t)

    def delete_in_chunks(self, statement: Statement, values: Mapping[str, Any]) -> int:
        """Runs a purge statement (PURGE_CHUNK rows a statement on MySQL, all on SQLite: queries.purge),
        a transaction each, until it deletes fewer; how many went."""
        deleted = 0
        while True:
            with self.transaction() as t:
                count = t.execute(statement, values)
            deleted += count
            if count < PURGE_CHUNK:
                return deleted

    def rows(self, statement: Statement, values: Mapping[str, Any]) -> Rows:
        return read_rows(statement, self.ENGINE, values, self.run)

    @contextmanager
    def checkpoint_transaction(self, checkpoint: Checkpoint) -> Iterator[Transaction]:
        """A transaction that also records the checkpoint, if nobody moved the offset first."""
        c = checkpoint
        with self.transaction() as t:
            found = t.rows(APPLIED_OFFSET_FOR_UPDATE, offset_values(c))
            check_offset(found[0] if found else None, c)
            yield t
            t.execute_rows(STORE_OFFSET, [stored_offset(c)])
            t.execute_rows(STORE_EVENTS, applied_events_rows(c, now_ms()))
            extend, add = applied_range(c, now_ms())
            if t.execute(*extend) == 0:
                t.execute(*add)

    def applied(self, consumer: str, topic_partition: str) -> Applied:
        found = self.rows(APPLIED_OFFSET, {"consumer": consumer, "topic_partition": topic_partition})
        return applied(found[0] if found else None)

    def seen_events(self, consumer: str, event_ids: Sequence[str]) -> dict[str, str | None]:
        return dict(self.rows(*seen_events(consumer, event_ids)))

    def covered(self, consumer: str, topic_partition: str, offsets: Sequence[int]) -> set[int]:
        return covered(self.rows(*covered_query(consumer, topic_partition, offsets)), offsets)


class Checkpointed:
    """A store of a consumer that keeps its offsets beside its data (docs/architecture.md's rules)."""

    _database: SqlDatabase

    def applied(self, consumer: str, topic_partition: str) -> Applied:
        return self._database.applied(consumer, topic_partition)

    def seen_events(self, consumer: str, event_ids: Sequence[str]) -> dict[str, str | None]:
        return self._database.seen_events(consumer, event_ids)

    def covered(self, consumer: str, topic_partition: str, offsets: Sequence[int]) -> set[int]:
        return self._database.covered(consumer, topic_partition, offsets)


class CrashIndexReads:
    _database: SqlDatabase
    # the engine's statement for the skus (after, limit), and the table that holds each report's key
    # (with its id and body hash): its own on MySQL, unpartitioned, so a key is one seek there
    SKUS: ClassVar[Statement]
    KEYS: ClassVar[sa.Table]

    def body_hashes(self, report_keys: Sequence[str]) -> dict[str, str | None]:
        return dict(self._database.rows(*body_hashes(self.KEYS, report_keys)))

    def origins(self, report_keys: Sequence[str]) -> dict[str, ReportOrigin]:
        return {str(key): ReportOrigin(str(sku), None if build is None else str(build), int(received_at),
                                       None if signature is None else str(signature))
                for key, sku, build, received_at, signature in self._database.rows(*origins(self.KEYS, report_keys))}

    def find(self, query: ReportFilter) -> list[IndexedReport]:
        return [report_from_row(row) for row in self._database.rows(*find_query(query))]

    def processed(self, results: Sequence[Processed]) -> None:
        latest = {result.report_key: result for result in results}
        if not latest:
            return
        with self._database.transaction() as t:
            ids = {str(key): int(report_id) for key, report_id in t.rows(*report_ids(self.KEYS, list(latest)))}
            known = [result for key, result in latest.items() if key in ids]
            for result in known:
                t.execute(SET_PROCESSED, processed_values(result, ids[result.report_key]))
            t.execute(*forget_awaiting([result.report_key for result in known]))
            t.execute_rows(AWAIT_SYMBOLS, [(path, r.report_key, r.at) for r in known for path in r.missing_symbols])

    def regroup(self, signatures: Mapping[int, str | None]) -> None:
        if signatures:
            with self._database.transaction() as t:
                t.execute_rows(SET_SIGNATURE, [(signature, report_id) for report_id, signature in signatures.items()])

    def awaiting_symbols(self, path: str, after_key: str, limit: int) -> list[str]:
        return [str(key) for (key,) in self._database.rows(AWAITING, {"path": path, "after": after_key,
                                                                       "limit": limit})]

    def get(self, report_id: int) -> IndexedReport | None:
        found = self._database.rows(GET_REPORT, {"report_id": report_id})
        return report_from_row(found[0]) if found else None

    def crash_groups(
        self, sku: str, from_ms: int, to_ms: int, limit: int, equals: Mapping[str, str] | None = None
    ) -> list[CrashGroup]:
        return crash_groups(self._database.rows(*crash_groups_query(sku, from_ms, to_ms, limit, equals)))

    def skus(self, after: str, limit: int) -> list[SkuSeen]:
        return skus_seen(self._database.rows(self.SKUS, {"after": after, "limit": limit}))

    def crash_counts(self, sku: str, from_ms: int, to_ms: int, bucket_ms: int,
                     equals: Mapping[str, str] | None = None) -> dict[int, int]:
        return bucket_counts(self._database.rows(*crash_counts_query(sku, from_ms, to_ms, bucket_ms, equals)))


class SessionCounterReads(Checkpointed):
    SKUS: ClassVar[Statement]

    def session_counts(self, sku: str, from_ms: int, to_ms: int, bucket_ms: int) -> dict[int, int]:
        return bucket_counts(self._database.rows(
            SESSION_COUNTS, {"bucket_ms": bucket_ms, "sku": sku, "from_ms": from_ms, "to_ms": to_ms}))

    def skus(self, after: str, limit: int) -> list[SkuSeen]:
        return skus_seen(self._database.rows(self.SKUS, {"after": after, "limit": limit}))


# how long a ban list found too long is not read whole (RankingReads.banned)
LONG_BAN_LIST_S = 60.0


class RankingReads(Checkpointed):
    # players a lookup asks for at once: within each engine's limit of bound values a statement
    SCORES_AT_ONCE: ClassVar[int]
    # counts a statement reads (a rank sums up to a range a level of the tree, each with 3 or 4 values)
    ONE_ROW_SELECTS: ClassVar[int]
    # asked about this many players or more (a ranking worker's batch), `banned` reads a ban list
    # of up to a quarter as many whole
    WHOLE_BAN_LIST_FROM = 256
    # until when (monotonic) `banned` takes the ban list for too long to read whole
    _long_ban_list_until = 0.0

    def get_board(self, board: str) -> BoardSettings | None:
        return self.boards_named([board]).get(board)

    def _hold_bans(self, t: Transaction, updates: Sequence[BoardUpdate]) -> None:
        """In the batch's transaction, before its writes: the players it writes hidden are banned
        still, their ban rows held until it commits (a lifting then waits, and its rechecks find
        the batch's records). BansLifted where one was lifted since the batch read the ban list."""
        hidden = sorted({player for update in updates for player in update.hidden})
        held: set[str] = set()
        size = self.SCORES_AT_ONCE
        for start in range(0, len(hidden), size):
            held |= {str(row[0]) for row in t.rows(*ranking_sql.still_banned(hidden[start : start + size]))}
        if lifted := [player for player in hidden if player not in held]:
            raise BansLifted(f"the bans of {len(lifted)} players the batch writes hidden were lifted since it read "
                             "them; it is tried again")

    def boards_named(self, boards: Sequence[str]) -> dict[str, BoardSettings]:
        return {settings.board: settings for settings in map(ranking_sql.board_settings,
                                                             self._chunked(boards, ranking_sql.boards_named))}

    def boards(self, after: str, limit: int) -> list[BoardSettings]:
        found = self._database.rows(ranking_sql.BOARDS, {"after": after, "limit": limit})
        return [ranking_sql.board_settings(row) for row in found]

    def seasons(self, board: str, before: int | None, limit: int) -> list[int]:
        found = self._database.rows(ranking_sql.SEASONS, {
            "board": board, "before": INT64_MAX if before is None else before, "limit": limit})
        return [int(start) for (start,) in found]

    def scores(self, board: str, player_ids: Sequence[str]) -> dict[str, int]:
        return {player: entry.score for player, entry in self.records(board, player_ids).items()}

    def records(self, board: str, player_ids: Sequence[str]) -> dict[str, Entry]:
        return {e.player_id: e for e in ranking_sql.entries(
            self._chunked(player_ids, lambda part: ranking_sql.scores(board, part)))}

    def sum_counts(self, board: str, each: Sequence[Sequence[NodeRange]]) -> list[int]:
        return self._one_each(each, lambda part: ranking_sql.sum_counts(board, part))

    def node_counts(self, board: str, nodes: NodeRange) -> dict[int, int]:
        rows = self._database.rows(ranking_sql.NODE_COUNTS, {
            "board": board, "level": nodes.level, "first": nodes.first, "last": nodes.last})
        return {int(prefix): int(count) for prefix, count in rows}

    def following(self, board: str, order: Order, position: Position, *, worse: bool, limit: int,
                  skip: int = 0) -> list[Entry]:
        found: list[Entry] = []
        for step in ranking_sql.FOLLOWING_STEPS:
            if len(found) >= limit:
                break
            query = ranking_sql.following(step, board, order, position, worse=worse, limit=limit - len(found),
                                          skip=skip)
            rows = ranking_sql.entries(self._database.rows(*query))
            if skip and not rows:  # all of this step skipped, or none there: the rest skips on
                counted = ranking_sql.following(step, board, order, position, worse=worse, limit=0, count=True)
                skip -= int(self._database.rows(*counted)[0][0])
            elif rows:
                skip = 0
            found += rows
        return found

    def leaves(self, board: str, scores: Sequence[int]) -> dict[int, int]:
        return {int(score): int(count)
                for score, count in self._chunked(scores, lambda part: ranking_sql.leaves(board, part))}

    def at_scores(self, board: str, scores: Sequence[int]) -> list[Entry]:
        return ranking_sql.entries(self._chunked(scores, lambda part: ranking_sql.at_scores(board, part)))

    def tie_nodes_at(self, board: str, scores: Sequence[int],
                     levels: Sequence[int]) -> dict[tuple[int, int], tuple[int, int]]:
        return {(int(score), int(level)): (int(prefix), int(count)) for score, level, prefix, count
                in self._chunked(scores, lambda part: ranking_sql.tie_nodes_at(board, part, levels))}

    def tie_counts(self, board: str, nodes: Sequence[tuple[int, int, int]]) -> dict[tuple[int, int, int], int]:
        return {(int(score), int(level), int(prefix)): int(count) for score, level, prefix, count
                in self._chunked(nodes, lambda part: ranking_sql.tie_counts(board, part), self.SCORES_AT_ONCE // 4)}

    def tie_sums(self, board: str, each: Sequence[tuple[int, Sequence[NodeRange]]]) -> list[int]:
        return self._one_each(each, lambda part: ranking_sql.sum_counts(board, [r for _, r in part],
                                                                        [score for score, _ in part]))

    def _chunked(self, items: Sequence[T], query: Callable[[list[T]], Query], at_once: int | None = None) -> Rows:
        """The rows of `query` over the items, SCORES_AT_ONCE of them a statement (or `at_once`, for
        a query that binds more values an item)."""
        found: Rows = []
        size = at_once or self.SCORES_AT_ONCE
        for start in range(0, len(items), size):
            found += self._database.rows(*query(list(items[start : start + size])))
        return found

    def _one_each(self, items: Sequence[T], query: Callable[[Sequence[T]], Query]) -> list[int]:
        """A count an item, from statements of ONE_ROW_SELECTS items each (statements.one_row_each)."""
        found: list[int] = []
        for start in range(0, len(items), self.ONE_ROW_SELECTS):
            part = items[start : start + self.ONE_ROW_SELECTS]
            counts = {int(i): int(count) for count, i in self._database.rows(*query(part))}
            found += [counts[i] for i in range(len(part))]
        return found

    def ban(self, player_id: str, banned_at: int) -> bool:
        with self._database.transaction() as t:
            return t.execute(ranking_sql.BAN, {"player_id": player_id, "banned_at": banned_at}) > 0

    def unban(self, player_id: str) -> bool:
        with self._database.transaction() as t:
            return t.execute(ranking_sql.UNBAN, {"player": player_id}) > 0

    def banned(self, player_ids: Sequence[str]) -> dict[str, int]:
        # most games ban few players: one read of the list, of no values, in place of a batch's
        # thousands of ids, whose IN lists took MariaDB 2 ms a thousand to parse and plan here, and
        # PyMySQL 1.3 ms to write. Read row by row, a list of a quarter as many players costs about
        # what they did; one found longer is not read whole for a while
        many = len(player_ids)
        if many >= self.WHOLE_BAN_LIST_FROM and time.monotonic() >= self._long_ban_list_until:
            if len(listed := self.bans("", many // 4 + 1)) <= many // 4:
                wanted = set(player_ids)
                return {player: at for player, at in listed if player in wanted}
            self._long_ban_list_until = time.monotonic() + LONG_BAN_LIST_S
        return {str(player): int(at) for player, at in self._chunked(player_ids, ranking_sql.banned)}

    def bans(self, after: str, limit: int) -> list[tuple[str, int]]:
        return [(str(player), int(at)) for player, at in self._database.rows(ranking_sql.BANS,
                                                                              {"after": after, "limit": limit})]

    def add_board(self, settings: BoardSettings) -> bool:
        with self._database.transaction() as t:
            row = dict(zip(ranking_sql.BOARD_COLUMNS, ranking_sql.board_row(settings), strict=True))
            return t.execute(ranking_sql.ADD_BOARD, row) > 0

    def replace_board(self, known: BoardSettings, settings: BoardSettings) -> bool:
        was, new = ranking_sql.board_row(known), ranking_sql.board_row(settings)
        if new == was:  # nothing to write; and MySQL counts a row set to what it held as unchanged
            return True
        values = {f"was_{c}": v for c, v in zip(ranking_sql.BOARD_COLUMNS, was, strict=True)}
        values |= {f"new_{c}": v for c, v in zip(ranking_sql.BOARD_COLUMNS, new, strict=True)}
        with self._database.transaction() as t:
            return t.execute(ranking_sql.REPLACE_BOARD, values) > 0

    def drop_season(self, board: str, start: int) -> int:
        key = {"board": season_key(board, start)}
        # in chunks while the season stays listed: a purge cut off is taken up by the next
        dropped = sum(self._database.delete_in_chunks(statement, key) for statement in ranking_sql.DROP_SEASON)
        # then the listing, in one transaction with what a late write (a ban's recheck, a replayed
        # spill) added since: rows left without a listing no purge would find again; a write after
        # this lists the season again, for the next purge. The listing first, as the worker's write
        # takes it first (ADD_SEASON): the other order deadlocked with it on MySQL
        def forget(t: Transaction) -> int:
            forgotten = t.execute(ranking_sql.FORGET_SEASON, {"board": board, "start": start})
            for statement in ranking_sql.DROP_SEASON:
                while (count := t.execute(statement, key)) >= PURGE_CHUNK:
                    forgotten += count
                forgotten += count
            return forgotten

        return dropped + self._database.in_transaction(forget)

    def keys_of(self, player_id: str) -> list[str]:
        return [str(key) for (key,) in self._database.rows(ranking_sql.KEYS_OF, {"player": player_id})]

    def tied_before(self, board: str, positions: Sequence[Position]) -> list[int]:
        # in playerId order, a tie's position counts from the one before it, and adds that one's
        # count: a friends list deep in one tie reads it once, not once a friend
        ranked = sorted(range(len(positions)), key=lambda i: positions[i])
        # whether each follows one of its tie
        chained = [n > 0 and positions[ranked[n - 1]][:2] == positions[i][:2] for n, i in enumerate(ranked)]
        spans = [(positions[ranked[n - 1]].player_id if chained[n] else "", positions[i]) for n, i in enumerate(ranked)]
        counts = self._one_each(spans, lambda part: ranking_sql.tied_between(board, part))
        found = [0] * len(positions)
        for n, i in enumerate(ranked):
            found[i] = counts[n] + (found[ranked[n - 1]] if chained[n] else 0)
        return found

    def better_tied(self, board: str, order: Order, keys: Sequence[tuple[int, int, int]], at_most: int) -> list[int]:
        return self._one_each(keys, lambda part: ranking_sql.better_tied(board, order, part, at_most))
