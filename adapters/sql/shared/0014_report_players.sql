-- A report's playerId in the index (ports.IndexEntry.player_id), so that a crash group counts the
-- players it affected (crashes.issues). Reports indexed before it have none, and count no player.
ALTER TABLE reports ADD COLUMN player_id VARCHAR(128);
