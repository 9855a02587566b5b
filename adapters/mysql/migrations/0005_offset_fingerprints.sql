-- Offsets that cannot lie: the fingerprint of the record at the applied offset, so a stored offset
-- is checked against the log before records at or below it are skipped as already applied.
ALTER TABLE applied_offsets ADD COLUMN fingerprint CHAR(16) NULL;
