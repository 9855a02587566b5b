-- When each board was wiped (a JSON list of epoch ms, the last ones): a wipe starts a season.
ALTER TABLE boards ADD COLUMN wipes TEXT;
