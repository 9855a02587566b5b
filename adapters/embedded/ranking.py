"""Leaderboards on SQLite: scores, tree node counts and board settings beside the crash index."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager

from adapters.embedded.index import SqliteIndexDatabase
from adapters.embedded.sqlite import sqlite_meaning
from adapters.errors import port_errors
from adapters.sql.ranking import (
    ADD_BOARD,
    ADD_COUNTS,
    ADD_SEASON,
    ADD_TIE_COUNTS,
    CLEAR_TIES,
    PUT_BOARD,
    REMOVE_SCORE,
    SET_METADATA,
    SET_SCORES,
    board_row,
    cleared_rows,
    metadata_rows,
    removed_rows,
    score_rows,
    season_rows,
    tie_count_rows,
)
from adapters.sql.reads import RankingReads
from adapters.sql.tournaments import TournamentRecords
from ports import BoardSettings, BoardUpdate, Checkpoint


@port_errors("ranking", sqlite_meaning)
class SqliteRankingStore(RankingReads, TournamentRecords):
    SCORES_AT_ONCE = 500  # SQLite's bound values a statement: 999 before 3.32
    ONE_ROW_SELECTS = 16  # 999 bound values before 3.32: a rank is up to 9 ranges of 4 (its board again)
    _database: SqliteIndexDatabase

    def __init__(self, database: SqliteIndexDatabase) -> None:
        self._database = database
        self._db = database.db

    def snapshot(self) -> AbstractContextManager[None]:
        return self._db.snapshot()

    def put_board(self, settings: BoardSettings) -> None:
        with self._database.transaction() as t:
            t.execute_rows(PUT_BOARD, [board_row(settings)])

    def apply(self, checkpoint: Checkpoint, updates: Sequence[BoardUpdate]) -> None:
        with self._database.checkpoint_transaction(checkpoint) as t:
            self._hold_bans(t, updates)
            t.execute_rows(ADD_BOARD, [board_row(u.settings) for u in updates])
            t.execute_rows(ADD_SEASON, season_rows(updates))
            t.execute_rows(SET_SCORES, score_rows(updates))
            t.execute_rows(REMOVE_SCORE, removed_rows(updates))
            t.execute_rows(SET_METADATA, metadata_rows(updates))
            t.execute_rows(ADD_COUNTS, [(u.stored_as, level, prefix, delta)
                                        for u in updates for (level, prefix), delta in u.deltas.items()])
            t.execute_rows(CLEAR_TIES, cleared_rows(updates))
            t.execute_rows(ADD_TIE_COUNTS, tie_count_rows(updates))

    def close(self) -> None:
        self._db.close()
