-- Bans (ranking.bans): the ban list, a record hidden while its player is on it, and the records
-- of a player, found by its id to be hidden or shown.
CREATE TABLE IF NOT EXISTS banned_players (
    player_id VARCHAR(128) NOT NULL PRIMARY KEY,
    banned_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
ALTER TABLE rank_scores ADD COLUMN hidden TINYINT NOT NULL DEFAULT 0;
CREATE INDEX rank_scores_player ON rank_scores (player_id);
