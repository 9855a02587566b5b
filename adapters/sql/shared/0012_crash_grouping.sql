-- Crash grouping (crashes.grouping): each sku's rules (frame globs to skip and to join, as JSON
-- lists, with a version a change increments) and the merges of a signature into another group.
CREATE TABLE IF NOT EXISTS crash_grouping_rules (
    sku VARCHAR(64) NOT NULL,
    skip_globs TEXT NOT NULL,
    join_globs TEXT NOT NULL,
    version INT NOT NULL,
    updated_at BIGINT NOT NULL,
    updated_by VARCHAR(128) NOT NULL,
    PRIMARY KEY (sku)
);
CREATE TABLE IF NOT EXISTS crash_merges (
    sku VARCHAR(64) NOT NULL,
    signature VARCHAR(64) NOT NULL,
    into_signature VARCHAR(64) NOT NULL,
    merged_at BIGINT NOT NULL,
    merged_by VARCHAR(128) NOT NULL,
    PRIMARY KEY (sku, signature)
);
CREATE INDEX crash_merges_into ON crash_merges (sku, into_signature);
