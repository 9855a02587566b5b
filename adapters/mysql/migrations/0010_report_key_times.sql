-- Retention forgets a report's key with the report and no other (DESIGN §3.6): each key row holds
-- its report's submit_time, and the purge deletes keys by the cut it deletes reports by. Keys whose
-- report is already gone get 0, so the next purge takes them.
ALTER TABLE report_keys ADD COLUMN submit_time BIGINT NULL;
UPDATE report_keys k JOIN reports r ON r.report_id = k.report_id SET k.submit_time = r.submit_time;
UPDATE report_keys SET submit_time = 0 WHERE submit_time IS NULL;
ALTER TABLE report_keys MODIFY submit_time BIGINT NOT NULL;
CREATE INDEX report_keys_submit ON report_keys (submit_time);
