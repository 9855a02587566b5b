"""Leaderboards on MySQL, in the same schema as the crash index."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager

from adapters.errors import port_errors
from adapters.mysql.database import MysqlDatabase, mysql_meaning
from adapters.sql.ranking import (
    ADD_BOARD,
    ADD_SEASON,
    PUT_BOARD,
    REMOVE_SCORE,
    board_row,
    removed_rows,
    season_rows,
)
from adapters.sql.reads import Cursor, RankingReads
from adapters.sql.tournaments import TournamentRecords
from ports import BoardSettings, BoardUpdate, Checkpoint

# well under max_allowed_packet (16 MiB by default) at about 60 bytes a row
_ROWS_PER_STATEMENT = 20_000
# a record's metadata is a few KB at most (ranking.model.Metadata)
_METADATA_PER_STATEMENT = 1_000


@port_errors("ranking", mysql_meaning)
class MysqlRankingStore(RankingReads, TournamentRecords):
    SCORES_AT_ONCE = 1000
    ONE_ROW_SELECTS = 64
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
            self._hold_bans(t, updates)
            # executemany folds these into one multi-row INSERT
            t.execute_rows(ADD_BOARD, [board_row(u.settings) for u in updates])
            t.execute_rows(ADD_SEASON, season_rows(updates))
            t.execute_rows(REMOVE_SCORE, removed_rows(updates))
            escape = self._database.connection().escape
            # the hot path (tens of thousands of rows a batch): rows are rendered here, with each
            # board escaped once and numbers through int(), instead of value by value, and every
            # board's in the same statements (they say what ranking.SET_SCORES, ADD_COUNTS and
            # ADD_TIE_COUNTS say; 66 ms against executemany's 94 for 20,000 scores on MariaDB here)
            scores, nodes, ties, carried = [], [], [], []
            for u in updates:
                board = escape(u.stored_as)
                tiebreaks, hidden = u.tiebreaks, u.hidden
                scores += [f"({board},{escape(player)},{int(score)},{int(tiebreaks.get(player, 0))},"
                           f"{int(player in hidden)})" for player, score in u.scores.items()]
                nodes += [f"({board},{int(level)},{int(prefix)},{int(delta)})"
                          for (level, prefix), delta in u.deltas.items()]
                ties += [f"({board},{int(score)},{int(level)},{int(prefix)},{int(delta)})"
                         for (score, level, prefix), delta in u.tie_deltas.items()]
                if u.metadata:
                    carried.append((board, [(escape(player), escape(value)) for player, value in u.metadata.items()]))
            _upsert(t.cursor, "INSERT INTO rank_scores (board, player_id, score, tiebreak, hidden) VALUES ", scores,
                    " ON DUPLICATE KEY UPDATE score = VALUES(score), tiebreak = VALUES(tiebreak),"
                    " hidden = VALUES(hidden)")
            _upsert(t.cursor, "INSERT INTO rank_nodes (board, level, prefix, count) VALUES ", nodes,
                    " ON DUPLICATE KEY UPDATE count = count + VALUES(count)")
            # after the scores, whose rows a new record's metadata goes in: one statement a chunk
            # (executemany would send an UPDATE a record, and every update may carry some)
            for board, metadata in carried:
                for start in range(0, len(metadata), _METADATA_PER_STATEMENT):
                    chunk = metadata[start : start + _METADATA_PER_STATEMENT]
                    t.cursor.execute(
                        "UPDATE rank_scores SET metadata = CASE player_id "
                        + " ".join(f"WHEN {player} THEN {value}" for player, value in chunk)
                        + f" END WHERE board = {board} AND player_id IN ({','.join(p for p, _ in chunk)})"
                    )
            # tie trees (ranking.ties): a few rows a tie, none on a board whose ties share a rank;
            # the trees that go, a statement a board (executemany sends a DELETE a row)
            for u in updates:
                if u.cleared:  # what ranking.CLEAR_TIES says, a score at a time
                    t.cursor.execute(f"DELETE FROM rank_tie_nodes WHERE board = {escape(u.stored_as)} AND score IN ("
                                     + ",".join(str(int(score)) for score in u.cleared) + ")")
            _upsert(t.cursor, "INSERT INTO rank_tie_nodes (board, score, level, prefix, count) VALUES ", ties,
                    " ON DUPLICATE KEY UPDATE count = count + VALUES(count)")

    def close(self) -> None:
        self._database.close()


def _upsert(cursor: Cursor, head: str, rows: list[str], tail: str) -> None:
    for start in range(0, len(rows), _ROWS_PER_STATEMENT):
        cursor.execute(head + ",".join(rows[start : start + _ROWS_PER_STATEMENT]) + tail)
