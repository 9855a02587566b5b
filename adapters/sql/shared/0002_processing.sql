-- Minidump processing: where each report's walk stands (NULL: no minidump), and the symbol files
-- its last walk lacked, by which their upload finds the reports to walk again.
ALTER TABLE reports ADD COLUMN processing VARCHAR(16);
CREATE TABLE IF NOT EXISTS awaiting_symbols (
    symbol_path VARCHAR(512) NOT NULL,
    report_key CHAR(32) NOT NULL,
    added_at BIGINT NOT NULL,
    PRIMARY KEY (symbol_path, report_key)
);
CREATE INDEX awaiting_symbols_report ON awaiting_symbols (report_key);
CREATE INDEX awaiting_symbols_added ON awaiting_symbols (added_at);
