-- A window's crash groups and counts of the whole sku, or of a platform or crash type, read the
-- window's entries of this alone (adapters.sql.queries): through (sku, signature, ...) they read
-- every entry of the sku, and with a platform or crash type looked up every report (2.4 s at a
-- million reports). The error code would pass MySQL's 3,072 bytes of a key.
CREATE INDEX reports_sku_received_groups ON reports (sku, received_at, signature, platform, crash_type);
