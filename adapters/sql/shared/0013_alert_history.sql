-- Alert history (crashes.alert_history): each alert's sku (NULL: a season end's, which is a
-- board's), read newest first by sku; and when its episode closed (velocity, crash-free drop; NULL
-- while open, and for an alert that is no episode). Episodes closed before this migration were not
-- timed: theirs stays NULL.
ALTER TABLE webhook_alerts ADD COLUMN sku VARCHAR(64);
ALTER TABLE webhook_alerts ADD COLUMN closed_at BIGINT;
-- the body's sku: a JSON string of A-Za-z0-9._:- (no quote to strip but its own), in SQL both take
UPDATE webhook_alerts SET sku = REPLACE(JSON_EXTRACT(body, '$.sku'), '"', '') WHERE sku IS NULL;
CREATE INDEX webhook_alerts_sku ON webhook_alerts (sku, created_at, alert_key);
-- a page's deliveries, by alert (the primary key leads with the webhook)
CREATE INDEX webhook_deliveries_alert ON webhook_deliveries (alert_key, webhook);
