-- An ignore for a number of reports (ports.issues.Issue.ignore_for): it counts the reports received
-- after it, which the group's count in the index (ignore_count) cannot tell from those received
-- before it and indexed after. ignore_for_at is the change it belongs to: a release before these
-- rewrites an issue without them, and its ignore (changed_at moved on) counts as it did.
ALTER TABLE crash_issues ADD COLUMN ignore_for BIGINT;
ALTER TABLE crash_issues ADD COLUMN ignore_for_at BIGINT;
