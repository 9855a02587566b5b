-- Bans (ranking.bans): the ban list, a record hidden while its player is on it, and the records
-- of a player, found by its id to be hidden or shown.
CREATE TABLE IF NOT EXISTS banned_players (
    player_id TEXT NOT NULL PRIMARY KEY,
    banned_at INTEGER NOT NULL
) WITHOUT ROWID;
ALTER TABLE rank_scores ADD COLUMN hidden INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS rank_scores_player ON rank_scores (player_id);
