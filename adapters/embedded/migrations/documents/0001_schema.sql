-- Documents: key to bytes, with an expiry, like a Couchbase bucket.
CREATE TABLE IF NOT EXISTS documents (
    key TEXT PRIMARY KEY,
    body BLOB NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS documents_expiry ON documents (expires_at);
