-- Retention forgets a report's key with the report and no other (DESIGN §3.6): each key row holds
-- its report's submit_time, and the purge deletes keys by the cut it deletes reports by. A key an
-- older writer inserts while this runs gets the time it was inserted at, within milliseconds of
-- its report's; keys whose report is already gone get 0, so the next purge takes them.
ALTER TABLE report_keys ADD COLUMN submit_time BIGINT NOT NULL DEFAULT (UNIX_TIMESTAMP(NOW(3)) * 1000);
UPDATE report_keys k JOIN reports r ON r.report_id = k.report_id SET k.submit_time = r.submit_time;
UPDATE report_keys k LEFT JOIN reports r ON r.report_id = k.report_id SET k.submit_time = 0
    WHERE r.report_id IS NULL;
CREATE INDEX report_keys_submit ON report_keys (submit_time);
