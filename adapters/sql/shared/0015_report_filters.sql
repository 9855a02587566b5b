-- A page of one build's or one signature's reports, and a build's crash counts, read that build's
-- or signature's index entries alone (adapters.sql.queries): without them a rare build's page
-- walked every report of its sku, and a build's counts looked up each report of the window.
CREATE INDEX reports_sku_build_id ON reports (sku, build_version, report_id);
-- received_at too: a grouping of a window, which may take either signature index, reads it alone
CREATE INDEX reports_sku_signature_id ON reports (sku, signature, report_id, received_at);
-- the signature too: a build's groups of a window read it alone
CREATE INDEX reports_sku_build_received ON reports (sku, build_version, received_at, signature);
