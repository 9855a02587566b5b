-- Alerts once per episode (crashes.alerts): a row per open episode of a velocity or crash-free
-- drop condition, inserted in the transaction that raises its alert (the key makes that once),
-- deleted when a later run finds the condition false.
CREATE TABLE IF NOT EXISTS alert_episodes (
    episode_key VARCHAR(160) NOT NULL,
    kind VARCHAR(32) NOT NULL,
    opened_at BIGINT NOT NULL,
    PRIMARY KEY (episode_key)
);
CREATE INDEX alert_episodes_kind ON alert_episodes (kind);
