-- How many past seasons of a board retention keeps (NULL: all of them).
ALTER TABLE boards ADD COLUMN keep_seasons INT;
