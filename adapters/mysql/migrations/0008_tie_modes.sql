-- Tie modes (ranking.ties): a board's `ties`, each record's tiebreak, the lists' order by score,
-- tiebreak and playerId, and the tie trees of the scores two players or more share (not in shared/:
-- the engines drop an index in different words). Each ALTER drops and adds an index of the same
-- name in one statement, so a rerun does it again.
ALTER TABLE boards ADD COLUMN ties VARCHAR(8);
ALTER TABLE rank_scores ADD COLUMN tiebreak BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rank_scores DROP INDEX rank_scores_asc, ADD INDEX rank_scores_asc (board, score, tiebreak, player_id);
ALTER TABLE rank_scores DROP INDEX rank_scores_desc,
    ADD INDEX rank_scores_desc (board, score DESC, tiebreak DESC, player_id);
CREATE TABLE IF NOT EXISTS rank_tie_nodes (
    board VARCHAR(160) NOT NULL,
    score BIGINT NOT NULL,
    level TINYINT UNSIGNED NOT NULL,
    prefix BIGINT NOT NULL,
    count BIGINT NOT NULL,
    PRIMARY KEY (board, score, level, prefix)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
