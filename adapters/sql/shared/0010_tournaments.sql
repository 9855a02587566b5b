-- Tournaments (ranking.tournaments): a board's window (epoch ms; NULL: open), its limits (NULL:
-- none), and each tournament season's players, their attempts, and the attempts kept by event id
-- for a retry. `board` is a season's key (`<board>@<start>`: ranking.seasons).
ALTER TABLE boards ADD COLUMN starts_at BIGINT;
ALTER TABLE boards ADD COLUMN ends_at BIGINT;
ALTER TABLE boards ADD COLUMN max_attempts INT;
ALTER TABLE boards ADD COLUMN max_players INT;
-- the season's lock (SELECT ... FOR UPDATE), and its player count
CREATE TABLE IF NOT EXISTS tournament_seasons (
    board VARCHAR(160) NOT NULL PRIMARY KEY,
    players INT NOT NULL
);
CREATE TABLE IF NOT EXISTS tournament_players (
    board VARCHAR(160) NOT NULL,
    player_id VARCHAR(128) NOT NULL,
    attempts INT NOT NULL,
    PRIMARY KEY (board, player_id)
);
CREATE TABLE IF NOT EXISTS tournament_attempts (
    event_id VARCHAR(36) NOT NULL PRIMARY KEY,
    board VARCHAR(160) NOT NULL,
    player_id VARCHAR(128) NOT NULL,
    attempt INT NOT NULL,
    received_at BIGINT NOT NULL,
    body_hash VARCHAR(64) NOT NULL
);
CREATE INDEX tournament_attempts_board ON tournament_attempts (board);
