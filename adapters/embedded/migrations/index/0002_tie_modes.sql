-- Tie modes (ranking.ties): a board's `ties`, each record's tiebreak, the lists' order by score,
-- tiebreak and playerId, and the tie trees of the scores two players or more share. Not in shared/:
-- the two engines drop an index in different words.
ALTER TABLE boards ADD COLUMN ties TEXT;
ALTER TABLE rank_scores ADD COLUMN tiebreak INTEGER NOT NULL DEFAULT 0;
DROP INDEX IF EXISTS rank_scores_asc;
DROP INDEX IF EXISTS rank_scores_desc;
CREATE INDEX rank_scores_asc ON rank_scores (board, score, tiebreak, player_id);
CREATE INDEX rank_scores_desc ON rank_scores (board, score DESC, tiebreak DESC, player_id);
CREATE TABLE IF NOT EXISTS rank_tie_nodes (
    board TEXT NOT NULL,
    score INTEGER NOT NULL,
    level INTEGER NOT NULL,
    prefix INTEGER NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (board, score, level, prefix)
) WITHOUT ROWID;
