-- When the newest alert run read its window (crashes.alerts): a run changes episodes only if no run
-- that read the window after it told it first, so that one that read it earlier (runs overlap: each
-- machine's consumers run the teller) does not undo a newer run's close or open. One row, id 1,
-- made here (not by a first run: runs at once would each make it); taken as made on a rerun.
CREATE TABLE IF NOT EXISTS alert_tellers (
    id INTEGER NOT NULL,
    told_at BIGINT NOT NULL,
    PRIMARY KEY (id)
);
INSERT INTO alert_tellers (id, told_at)
    SELECT 1, 0 FROM (SELECT 1 AS one) AS made WHERE NOT EXISTS (SELECT 1 FROM alert_tellers WHERE id = 1);
