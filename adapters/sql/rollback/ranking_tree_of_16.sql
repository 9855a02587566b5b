-- Run before going back to a release whose ranking tree has B = 16 (17 levels, 0 to 16), on
-- MySQL or SQLite, with no ranking worker running. This release's tree (B = 256, ranking/tree.py)
-- keeps that tree's even levels and leaves its odd ones stale: each is rebuilt here from the even
-- level below it, its prefixes those below shifted right by 4 (a floor division both engines take).
DELETE FROM rank_nodes WHERE level IN (1, 3, 5, 7, 9, 11, 13, 15);
INSERT INTO rank_nodes (board, level, prefix, count)
SELECT board, level + 1, (prefix - ((prefix % 16) + 16) % 16) / 16, SUM(count)
FROM rank_nodes WHERE level IN (0, 2, 4, 6, 8, 10, 12, 14)
GROUP BY board, level, (prefix - ((prefix % 16) + 16) % 16) / 16;
