-- What is announced once across every consumer (crashes.spikes: a crash spike, by sku and minute):
-- the one that adds the row announces it. Purged with the alerts, by retention.
CREATE TABLE IF NOT EXISTS announcements (
    announcement_key VARCHAR(255) NOT NULL,
    announced_at BIGINT NOT NULL,
    PRIMARY KEY (announcement_key)
);
CREATE INDEX announcements_at ON announcements (announced_at);
