-- The crash index, RANGE-partitioned by day on submit_time so retention drops whole partitions.
-- MySQL wants every unique key of a partitioned table to hold the partitioning column, so
-- report_keys (not partitioned) enforces UNIQUE reportKey and hands out reportIds.
CREATE TABLE IF NOT EXISTS report_keys (
    report_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    report_key CHAR(32) NOT NULL,
    UNIQUE KEY report_keys_key (report_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS reports (
    report_id BIGINT UNSIGNED NOT NULL,
    submit_time BIGINT NOT NULL,
    report_key CHAR(32) NOT NULL,
    event_id VARCHAR(64) NOT NULL,
    sku VARCHAR(64) NOT NULL,
    received_at BIGINT NOT NULL,
    size_bytes INT UNSIGNED NOT NULL,
    crash_type VARCHAR(256) NULL,
    error_code VARCHAR(256) NULL,
    platform VARCHAR(256) NULL,
    build_version VARCHAR(256) NULL,
    signature CHAR(16) NULL,
    attachments TEXT NOT NULL,
    PRIMARY KEY (report_id, submit_time),
    KEY reports_sku_id (sku, report_id),
    KEY reports_sku_submit (sku, submit_time),
    KEY reports_sku_received (sku, received_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
PARTITION BY RANGE (submit_time) (PARTITION p_future VALUES LESS THAN MAXVALUE);

CREATE TABLE IF NOT EXISTS session_counts (
    sku VARCHAR(64) NOT NULL,
    minute BIGINT NOT NULL,
    kind VARCHAR(16) NOT NULL,
    count BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (sku, minute, kind)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS applied_offsets (
    consumer VARCHAR(64) NOT NULL,
    topic_partition VARCHAR(255) NOT NULL,
    applied BIGINT NOT NULL,
    PRIMARY KEY (consumer, topic_partition)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
