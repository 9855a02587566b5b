"""Leaderboards on MySQL, in the same schema as the crash index."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager

from adapters.errors import port_errors
from adapters.mysql.database import MysqlDatabase, mysql_meaning
from adapters.sql.ranking import (
    ADD_BOARD,
    ADD_SEASON,
    ADD_TIE_COUNTS,
    CLEAR_TIES,
    PUT_BOARD,
    REMOVE_SCORE,
    board_row,
    removed_rows,
    season_rows,
    tie_rows,
)
from adapters.sql.reads import RankingReads
from ports import BoardSettings, BoardUpdate, Checkpoint

# well under max_allowed_packet (16 MiB by default) at about 60 bytes a row
_ROWS_PER_STATEMENT = 20_000
# a record's metadata is a few KB at most (ranking.model.Metadata)
_METADATA_PER_STATEMENT = 1_000


@port_errors("ranking", mysql_meaning)
class MysqlRankingStore(RankingReads):
    SCORES_AT_ONCE = 1000
    _database: MysqlDatabase

    def __init__(self, database: MysqlDatabase) -> None:
        self._database = database

    def snapshot(self) -> AbstractContextManager[None]:
        return self._database.snapshot()

    def put_board(self, settings: BoardSettings) -> None:
        with self._database.transaction() as t:
            t.execute_rows(PUT_BOARD, [board_row(settings)])

    def apply(self, checkpoint: Checkpoint, updates: Sequence[BoardUpdate]) -> None:
        with self._database.checkpoint_transaction(checkpoint) as t:
            # executemany folds these into one multi-row INSERT
            t.execute_rows(ADD_BOARD, [board_row(u.settings) for u in updates])
            t.execute_rows(ADD_SEASON, season_rows(updates))
            t.execute_rows(REMOVE_SCORE, removed_rows(updates))
            cursor = t.cursor
            escape = self._database.connection().escape
            for u in updates:
                # the hot path (tens of thousands of rows a batch): rows are rendered here, with
                # the board escaped once and numbers through int(), instead of value by value (they
                # say what ranking.SET_SCORES and ADD_COUNTS say; 66 ms against executemany's 94 for
                # 20,000 scores on MariaDB here)
                board = escape(u.stored_as)
                tiebreaks, hidden = u.tiebreaks, u.hidden
                scores = [f"({board},{escape(player)},{int(score)},{int(tiebreaks.get(player, 0))},"
                          f"{int(player in hidden)})" for player, score in u.scores.items()]
                nodes = [f"({board},{int(level)},{int(prefix)},{int(delta)})"
                         for (level, prefix), delta in u.deltas.items()]
                for start in range(0, len(scores), _ROWS_PER_STATEMENT):
                    cursor.execute(
                        "INSERT INTO rank_scores (board, player_id, score, tiebreak, hidden) VALUES "
                        + ",".join(scores[start : start + _ROWS_PER_STATEMENT])
                        + " ON DUPLICATE KEY UPDATE score = VALUES(score), tiebreak = VALUES(tiebreak),"
                          " hidden = VALUES(hidden)"
                    )
                for start in range(0, len(nodes), _ROWS_PER_STATEMENT):
                    cursor.execute(
                        "INSERT INTO rank_nodes (board, level, prefix, count) VALUES "
                        + ",".join(nodes[start : start + _ROWS_PER_STATEMENT])
                        + " ON DUPLICATE KEY UPDATE count = count + VALUES(count)"
                    )
                # after the scores, whose rows a new record's metadata goes in: one statement a
                # chunk (executemany would send an UPDATE a record, and every update may carry some)
                carried = [(escape(player), escape(metadata)) for player, metadata in u.metadata.items()]
                for start in range(0, len(carried), _METADATA_PER_STATEMENT):
                    chunk = carried[start : start + _METADATA_PER_STATEMENT]
                    cursor.execute(
                        "UPDATE rank_scores SET metadata = CASE player_id "
                        + " ".join(f"WHEN {player} THEN {metadata}" for player, metadata in chunk)
                        + f" END WHERE board = {board} AND player_id IN ({','.join(p for p, _ in chunk)})"
                    )
            # tie trees (ranking.ties): a few rows a tie, none on a board whose ties share a rank
            cleared, tie_counts = tie_rows(updates)
            t.execute_rows(CLEAR_TIES, cleared)
            t.execute_rows(ADD_TIE_COUNTS, tie_counts)

    def close(self) -> None:
        self._database.close()
