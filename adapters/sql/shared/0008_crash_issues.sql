-- Crash groups as issues (ports.issues): each signature's state per sku and its history; alerts,
-- each once under its key (the outbox); the webhooks a studio registered and each one's
-- delivery of each alert, with its attempts.
CREATE TABLE IF NOT EXISTS crash_issues (
    sku VARCHAR(64) NOT NULL,
    signature VARCHAR(64) NOT NULL,
    state VARCHAR(16) NOT NULL,
    build VARCHAR(128),
    ignore_until BIGINT,
    ignore_count BIGINT,
    episode INT NOT NULL,
    first_seen BIGINT NOT NULL,
    changed_at BIGINT NOT NULL,
    changed_by VARCHAR(128) NOT NULL,
    PRIMARY KEY (sku, signature)
);
CREATE TABLE IF NOT EXISTS crash_issue_history (
    sku VARCHAR(64) NOT NULL,
    signature VARCHAR(64) NOT NULL,
    seq INT NOT NULL,
    state VARCHAR(16) NOT NULL,
    build VARCHAR(128),
    ignore_until BIGINT,
    ignore_count BIGINT,
    changed_at BIGINT NOT NULL,
    changed_by VARCHAR(128) NOT NULL,
    PRIMARY KEY (sku, signature, seq)
);
CREATE TABLE IF NOT EXISTS webhook_alerts (
    alert_key VARCHAR(200) NOT NULL,
    kind VARCHAR(32) NOT NULL,
    created_at BIGINT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (alert_key)
);
CREATE INDEX webhook_alerts_created ON webhook_alerts (created_at);
CREATE TABLE IF NOT EXISTS webhooks (
    name VARCHAR(64) NOT NULL,
    url VARCHAR(2048) NOT NULL,
    secret VARCHAR(256) NOT NULL,
    kinds VARCHAR(256) NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (name)
);
CREATE TABLE IF NOT EXISTS webhook_deliveries (
    webhook VARCHAR(64) NOT NULL,
    alert_key VARCHAR(200) NOT NULL,
    status VARCHAR(16) NOT NULL,
    attempts INT NOT NULL,
    next_attempt BIGINT NOT NULL,
    last_code INT,
    last_error VARCHAR(512),
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (webhook, alert_key)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt);
CREATE INDEX webhook_deliveries_newest ON webhook_deliveries (webhook, updated_at);
-- a group's page and an ignore that waits for a count read a group's reports by build
CREATE INDEX reports_sku_signature ON reports (sku, signature, build_version, received_at);
