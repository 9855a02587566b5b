-- The log's own settings: its partition count, kept from when the file was made. A key's partition
-- is its crc32 modulo the count, so a process set to another would leave records unread or put a
-- key's new records in another partition than its waiting ones (adapters/embedded/log.py).
CREATE TABLE IF NOT EXISTS settings (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
