-- A leaderboard record's metadata: the JSON object its update carried (ranking.model.Score).
ALTER TABLE rank_scores ADD COLUMN metadata TEXT;
