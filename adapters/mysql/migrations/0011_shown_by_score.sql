-- A board's records by score hold whether each is hidden (ranking.bans) after the board: every read
-- by score asks for the records shown, and seeks past the hidden ones rather than stepping
-- through them (a board's banned bots would otherwise be read by each page that passes them).
-- Each ALTER drops and adds an index of the same name in one statement, so a rerun does it again.
ALTER TABLE rank_scores DROP INDEX rank_scores_asc,
    ADD INDEX rank_scores_asc (board, hidden, score, tiebreak, player_id);
ALTER TABLE rank_scores DROP INDEX rank_scores_desc,
    ADD INDEX rank_scores_desc (board, hidden, score DESC, tiebreak DESC, player_id);
