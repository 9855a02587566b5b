-- A season's scores and tree are stored under `<board>@<start>` (ranking.seasons): a board name
-- of 128 characters and its start in epoch ms. SQLite's TEXT has no length to widen.
ALTER TABLE rank_scores MODIFY board VARCHAR(160) NOT NULL;
ALTER TABLE rank_nodes MODIFY board VARCHAR(160) NOT NULL;
