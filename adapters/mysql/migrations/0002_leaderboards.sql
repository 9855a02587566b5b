-- Leaderboards: board settings, each player's score, and the ranking tree's node counts
-- (DESIGN §4). Two score indexes serve lists in either order with ties by playerId ascending.
CREATE TABLE IF NOT EXISTS boards (
    board VARCHAR(128) NOT NULL PRIMARY KEY,
    sort_order VARCHAR(4) NOT NULL,
    operator VARCHAR(4) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS rank_scores (
    board VARCHAR(128) NOT NULL,
    player_id VARCHAR(128) NOT NULL,
    score BIGINT NOT NULL,
    PRIMARY KEY (board, player_id),
    KEY rank_scores_asc (board, score, player_id),
    KEY rank_scores_desc (board, score DESC, player_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS rank_nodes (
    board VARCHAR(128) NOT NULL,
    level TINYINT UNSIGNED NOT NULL,
    prefix BIGINT NOT NULL,
    count BIGINT NOT NULL,
    PRIMARY KEY (board, level, prefix)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
