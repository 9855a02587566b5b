-- Release health (ports.releases): sessions per sku, build, minute and outcome; the builds of a
-- sku with their first and last minute; a build's players per UTC day by id (crashed = 1: those
-- with a crashed session) until there are EXACT_PLAYERS, then as a HyperLogLog sketch.
CREATE TABLE IF NOT EXISTS release_sessions (
    sku VARCHAR(64) NOT NULL,
    build VARCHAR(128) NOT NULL,
    minute BIGINT NOT NULL,
    status VARCHAR(16) NOT NULL,
    count BIGINT NOT NULL,
    PRIMARY KEY (sku, build, minute, status)
);
CREATE TABLE IF NOT EXISTS release_builds (
    sku VARCHAR(64) NOT NULL,
    build VARCHAR(128) NOT NULL,
    first_seen BIGINT NOT NULL,
    last_seen BIGINT NOT NULL,
    PRIMARY KEY (sku, build)
);
CREATE INDEX release_builds_newest ON release_builds (sku, first_seen, build);
CREATE INDEX release_builds_last_seen ON release_builds (last_seen);
CREATE TABLE IF NOT EXISTS release_players (
    sku VARCHAR(64) NOT NULL,
    build VARCHAR(128) NOT NULL,
    day BIGINT NOT NULL,
    crashed SMALLINT NOT NULL,
    player VARCHAR(128) NOT NULL,
    PRIMARY KEY (sku, build, day, crashed, player)
);
CREATE INDEX release_players_day ON release_players (day);
CREATE TABLE IF NOT EXISTS release_sketches (
    sku VARCHAR(64) NOT NULL,
    build VARCHAR(128) NOT NULL,
    day BIGINT NOT NULL,
    crashed SMALLINT NOT NULL,
    registers BLOB NOT NULL,
    PRIMARY KEY (sku, build, day, crashed)
);
CREATE INDEX release_sketches_day ON release_sketches (day);
CREATE INDEX release_sessions_minute ON release_sessions (minute);
