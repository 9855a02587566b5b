-- First write wins (DESIGN §3.9): the hash of what a reused Idempotency-Key first carried, so a
-- consumer tells a retry (same body) from another body under the same key. NULL for keyless events.
ALTER TABLE report_keys ADD COLUMN body_hash CHAR(64) NULL;
ALTER TABLE applied_events ADD COLUMN body_hash CHAR(64) NULL;
