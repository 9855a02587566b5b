-- Run before going back to a release whose ranking tree has B = 16 (17 levels, 0 to 16), on
-- MySQL or SQLite, with no ranking worker running. This release's tree (B = 256, ranking/tree.py)
-- keeps that tree's even levels and leaves its odd ones stale: each is rebuilt here from the level
-- below it, its prefixes those below shifted right by 4 (a floor division both engines take).
DELETE FROM rank_nodes WHERE level IN (1, 3, 5, 7, 9, 11, 13, 15);
INSERT INTO rank_nodes (board, level, prefix, count)
SELECT board, 1, (prefix - ((prefix % 16) + 16) % 16) / 16, SUM(count) FROM rank_nodes WHERE level = 0
GROUP BY board, (prefix - ((prefix % 16) + 16) % 16) / 16;
INSERT INTO rank_nodes (board, level, prefix, count)
SELECT board, 3, (prefix - ((prefix % 16) + 16) % 16) / 16, SUM(count) FROM rank_nodes WHERE level = 2
GROUP BY board, (prefix - ((prefix % 16) + 16) % 16) / 16;
INSERT INTO rank_nodes (board, level, prefix, count)
SELECT board, 5, (prefix - ((prefix % 16) + 16) % 16) / 16, SUM(count) FROM rank_nodes WHERE level = 4
GROUP BY board, (prefix - ((prefix % 16) + 16) % 16) / 16;
INSERT INTO rank_nodes (board, level, prefix, count)
SELECT board, 7, (prefix - ((prefix % 16) + 16) % 16) / 16, SUM(count) FROM rank_nodes WHERE level = 6
GROUP BY board, (prefix - ((prefix % 16) + 16) % 16) / 16;
INSERT INTO rank_nodes (board, level, prefix, count)
SELECT board, 9, (prefix - ((prefix % 16) + 16) % 16) / 16, SUM(count) FROM rank_nodes WHERE level = 8
GROUP BY board, (prefix - ((prefix % 16) + 16) % 16) / 16;
INSERT INTO rank_nodes (board, level, prefix, count)
SELECT board, 11, (prefix - ((prefix % 16) + 16) % 16) / 16, SUM(count) FROM rank_nodes WHERE level = 10
GROUP BY board, (prefix - ((prefix % 16) + 16) % 16) / 16;
INSERT INTO rank_nodes (board, level, prefix, count)
SELECT board, 13, (prefix - ((prefix % 16) + 16) % 16) / 16, SUM(count) FROM rank_nodes WHERE level = 12
GROUP BY board, (prefix - ((prefix % 16) + 16) % 16) / 16;
INSERT INTO rank_nodes (board, level, prefix, count)
SELECT board, 15, (prefix - ((prefix % 16) + 16) % 16) / 16, SUM(count) FROM rank_nodes WHERE level = 14
GROUP BY board, (prefix - ((prefix % 16) + 16) % 16) / 16;
