-- A board's records by score hold whether each is hidden (ranking.bans) after the board: every read
-- by score asks for the records shown, and seeks past the hidden ones rather than stepping
-- through them (a board's banned bots would otherwise be read by each page that passes them).
DROP INDEX IF EXISTS rank_scores_asc;
DROP INDEX IF EXISTS rank_scores_desc;
CREATE INDEX rank_scores_asc ON rank_scores (board, hidden, score, tiebreak, player_id);
CREATE INDEX rank_scores_desc ON rank_scores (board, hidden, score DESC, tiebreak DESC, player_id);
