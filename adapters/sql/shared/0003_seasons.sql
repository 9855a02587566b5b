-- Leaderboard seasons: a board's reset schedule (NULL: never), and the seasons that hold scores
-- (each stored as its own board key, `<board>@<start>`: ranking.seasons).
ALTER TABLE boards ADD COLUMN reset_schedule VARCHAR(128);
CREATE TABLE IF NOT EXISTS board_seasons (
    board VARCHAR(128) NOT NULL,
    season_start BIGINT NOT NULL,
    PRIMARY KEY (board, season_start)
);
