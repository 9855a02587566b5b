-- An ignore for a number of reports (ports.issues.Issue.ignore_for): it counts the reports received
-- after it, which the group's count in the index (ignore_count) cannot tell from those received
-- before it and indexed after. An ignore set before this keeps counting as it did.
ALTER TABLE crash_issues ADD COLUMN ignore_for BIGINT;
