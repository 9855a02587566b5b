-- The crash index, session counts, leaderboards and the consumers' checkpoints, in one file as
-- one MySQL schema holds them (as of the first versioned migration).
CREATE TABLE IF NOT EXISTS reports (
    report_id INTEGER PRIMARY KEY AUTOINCREMENT,
    report_key TEXT NOT NULL UNIQUE,
    event_id TEXT NOT NULL,
    sku TEXT NOT NULL,
    submit_time INTEGER NOT NULL,
    received_at INTEGER NOT NULL,
    crash_type TEXT,
    error_code TEXT,
    platform TEXT,
    build_version TEXT,
    signature TEXT,
    size_bytes INTEGER NOT NULL,
    attachments TEXT NOT NULL,
    body_hash TEXT
);
CREATE INDEX IF NOT EXISTS reports_sku_id ON reports (sku, report_id);
CREATE INDEX IF NOT EXISTS reports_sku_submit ON reports (sku, submit_time);
CREATE INDEX IF NOT EXISTS reports_sku_received ON reports (sku, received_at);
CREATE TABLE IF NOT EXISTS session_counts (
    sku TEXT NOT NULL,
    minute INTEGER NOT NULL,
    kind TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (sku, minute, kind)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS boards (
    board TEXT PRIMARY KEY,
    sort_order TEXT NOT NULL,
    operator TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rank_scores (
    board TEXT NOT NULL,
    player_id TEXT NOT NULL,
    score INTEGER NOT NULL,
    PRIMARY KEY (board, player_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rank_scores_asc ON rank_scores (board, score, player_id);
CREATE INDEX IF NOT EXISTS rank_scores_desc ON rank_scores (board, score DESC, player_id);
CREATE TABLE IF NOT EXISTS rank_nodes (
    board TEXT NOT NULL,
    level INTEGER NOT NULL,
    prefix INTEGER NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (board, level, prefix)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS applied_events (
    consumer TEXT NOT NULL,
    event_id TEXT NOT NULL,
    applied_at INTEGER NOT NULL,
    body_hash TEXT,
    PRIMARY KEY (consumer, event_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS applied_offsets (
    consumer TEXT NOT NULL,
    topic_partition TEXT NOT NULL,
    applied INTEGER NOT NULL,
    fingerprint TEXT,
    PRIMARY KEY (consumer, topic_partition)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS applied_ranges (
    consumer TEXT NOT NULL,
    topic_partition TEXT NOT NULL,
    first_offset INTEGER NOT NULL,
    last_offset INTEGER NOT NULL,
    applied_at INTEGER NOT NULL,
    PRIMARY KEY (consumer, topic_partition, first_offset)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS applied_ranges_age ON applied_ranges (applied_at);
