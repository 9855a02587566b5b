-- The projects of native crash reporters (a Sentry DSN's project id): each stands for one sku.
CREATE TABLE IF NOT EXISTS projects (
    project_id BIGINT NOT NULL PRIMARY KEY,
    sku VARCHAR(64) NOT NULL,
    updated_at BIGINT NOT NULL
);
