-- When a board's seasons started outside its schedule, and the schedule from then on: a wipe, or a
-- change of schedule (a JSON list of [epoch ms, schedule], the first from 0; ranking.seasons).
ALTER TABLE boards ADD COLUMN epochs TEXT;
