"""What the SQL adapters read alike on SQLite and MySQL, written once: each engine's database gives
`rows` (statements with `?` placeholders), and its adapters add only what differs, their writes
and the statements an engine plans its own way."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from adapters.sql import ranking as ranking_sql
from adapters.sql.queries import (
    APPLIED_OFFSET,
    SELECT_REPORTS,
    SESSION_COUNTS,
    applied,
    body_hashes,
    bucket_counts,
    covered,
    covered_query,
    crash_counts_query,
    crash_groups,
    crash_groups_query,
    find_query,
    report_from_row,
    seen_events,
    skus_seen,
)
from ports import Applied, BoardSettings, CrashGroup, Entry, IndexedReport, NodeRange, Order, ReportFilter, SkuSeen

Rows = list[tuple[Any, ...]]


class SqlDatabase(ABC):
    """An engine's database: its reads, and the consumers' bookkeeping read through them."""

    @abstractmethod
    def rows(self, query: str, params: Sequence[Any] = ()) -> Rows:
        """`query` with `?` placeholders, run on this thread's connection."""

    def applied(self, consumer: str, topic_partition: str) -> Applied:
        found = self.rows(APPLIED_OFFSET, (consumer, topic_partition))
        return applied(found[0] if found else None)

    def seen_events(self, consumer: str, event_ids: Sequence[str]) -> dict[str, str | None]:
        return dict(self.rows(*seen_events(consumer, event_ids)))

    def covered(self, consumer: str, topic_partition: str, offsets: Sequence[int]) -> set[int]:
        return covered(self.rows(*covered_query(consumer, topic_partition, offsets)), offsets)


class Checkpointed:
    """A store of a consumer that keeps its offsets beside its data (DESIGN §3)."""

    _database: SqlDatabase

    def applied(self, consumer: str, topic_partition: str) -> Applied:
        return self._database.applied(consumer, topic_partition)

    def seen_events(self, consumer: str, event_ids: Sequence[str]) -> dict[str, str | None]:
        return self._database.seen_events(consumer, event_ids)

    def covered(self, consumer: str, topic_partition: str, offsets: Sequence[int]) -> set[int]:
        return self._database.covered(consumer, topic_partition, offsets)


class CrashIndexReads:
    _database: SqlDatabase
    # the engine's hint for the (sku, report_id) index (queries.find_query), its statement for the
    # skus, and the table a report's body hash is read from
    SKU_ORDER_INDEX: ClassVar[str]
    SKUS: ClassVar[str]
    BODY_HASHES: ClassVar[str]

    def body_hashes(self, report_keys: Sequence[str]) -> dict[str, str | None]:
        return dict(self._database.rows(*body_hashes(self.BODY_HASHES, report_keys)))

    def find(self, query: ReportFilter) -> list[IndexedReport]:
        return [report_from_row(row) for row in self._database.rows(*find_query(query, self.SKU_ORDER_INDEX))]

    def get(self, report_id: int) -> IndexedReport | None:
        found = self._database.rows(f"{SELECT_REPORTS} WHERE report_id = ?", (report_id,))
        return report_from_row(found[0]) if found else None

    def crash_groups(
        self, sku: str, from_ms: int, to_ms: int, limit: int, equals: Mapping[str, str] | None = None
    ) -> list[CrashGroup]:
        return crash_groups(self._database.rows(*crash_groups_query(sku, from_ms, to_ms, limit, equals)))

    def skus(self, after: str, limit: int) -> list[SkuSeen]:
        return skus_seen(self._database.rows(self.SKUS, (after, limit)))

    def crash_counts(self, sku: str, from_ms: int, to_ms: int, bucket_ms: int,
                     equals: Mapping[str, str] | None = None) -> dict[int, int]:
        return bucket_counts(self._database.rows(*crash_counts_query(sku, from_ms, to_ms, bucket_ms, equals)))


class SessionCounterReads(Checkpointed):
    SKUS: ClassVar[str]

    def session_counts(self, sku: str, from_ms: int, to_ms: int, bucket_ms: int) -> dict[int, int]:
        return bucket_counts(self._database.rows(SESSION_COUNTS, (bucket_ms, sku, from_ms, to_ms)))

    def skus(self, after: str, limit: int) -> list[SkuSeen]:
        return skus_seen(self._database.rows(self.SKUS, (after, limit)))


class RankingReads(Checkpointed):
    # players a lookup asks for at once: within each engine's limit of bound values a statement
    SCORES_AT_ONCE: ClassVar[int]

    def get_board(self, board: str) -> BoardSettings | None:
        found = self._database.rows(ranking_sql.GET_BOARD, (board,))
        return BoardSettings(*found[0]) if found else None

    def boards(self, after: str, limit: int) -> list[BoardSettings]:
        return [BoardSettings(*row) for row in self._database.rows(ranking_sql.BOARDS, (after, limit))]

    def scores(self, board: str, player_ids: Sequence[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        for start in range(0, len(player_ids), self.SCORES_AT_ONCE):
            query, params = ranking_sql.scores(board, player_ids[start : start + self.SCORES_AT_ONCE])
            found.update((e.player_id, e.score) for e in ranking_sql.entries(self._database.rows(query, params)))
        return found

    def sum_counts(self, board: str, ranges: Sequence[NodeRange]) -> int:
        return int(self._database.rows(*ranking_sql.sum_counts(board, ranges))[0][0]) if ranges else 0

    def node_counts(self, board: str, nodes: NodeRange) -> dict[int, int]:
        rows = self._database.rows(ranking_sql.NODE_COUNTS, (board, nodes.level, nodes.first, nodes.last))
        return {int(prefix): int(count) for prefix, count in rows}

    def tied(self, board: str, score: int, after_player: str, limit: int, skip: int = 0) -> list[Entry]:
        return ranking_sql.entries(self._database.rows(ranking_sql.TIED, (board, score, after_player, limit, skip)))

    def tied_before(self, board: str, score: int, before_player: str, limit: int) -> list[Entry]:
        return ranking_sql.entries(self._database.rows(ranking_sql.TIED_BEFORE, (board, score, before_player, limit)))

    def beyond(self, board: str, order: Order, score: int, worse: bool, limit: int) -> list[Entry]:
        return ranking_sql.entries(self._database.rows(*ranking_sql.beyond(board, order, score, worse, limit)))
