-- The eventIds each consumer applied, written in the same transaction as the data: a client retry
-- with the same Idempotency-Key (so the same eventId) at a new offset is skipped.
CREATE TABLE IF NOT EXISTS applied_events (
    consumer VARCHAR(64) NOT NULL,
    event_id VARCHAR(64) NOT NULL,
    applied_at BIGINT NOT NULL,
    PRIMARY KEY (consumer, event_id),
    KEY applied_events_age (applied_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
