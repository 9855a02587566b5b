-- The offsets each consumer's transactions covered, per partition, a row for each run without a gap,
-- written with the data: a failed batch replayed after later batches moved the stored offset past it
-- is applied where no range covers its records, and skipped where one does (pipeline.offsets).
CREATE TABLE IF NOT EXISTS applied_ranges (
    consumer VARCHAR(64) NOT NULL,
    topic_partition VARCHAR(255) NOT NULL,
    first_offset BIGINT NOT NULL,
    last_offset BIGINT NOT NULL,
    applied_at BIGINT NOT NULL,
    PRIMARY KEY (consumer, topic_partition, first_offset),
    -- the extending UPDATE finds its row by its end: without this it would scan, and lock, the
    -- partition's rows and the gap after them, and other partitions' transactions would wait
    KEY applied_ranges_end (consumer, topic_partition, last_offset),
    KEY applied_ranges_age (applied_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
