"""The tables the SQL adapters share, as SQLAlchemy Core sees them to write statements: names only
(the migrations create them, with each engine's types and indexes)."""

from __future__ import annotations

from dataclasses import fields

import sqlalchemy as sa

from ports import IndexEntry

# IndexEntry's fields are the index's columns (its attachments, JSON in one): a field added there is
# a column here, once a migration (adapters/sql/shared/) adds it
ENTRY_COLUMNS = tuple(f.name for f in fields(IndexEntry) if f.name != "attachments")
# written with the row, not read back with it: only a consumer compares it, by body_hashes()
BODY_HASH = "body_hash"
INSERT_COLUMNS = ("report_id", "submit_time", *ENTRY_COLUMNS, "attachments")

_metadata = sa.MetaData()


def _table(name: str, *columns: str) -> sa.Table:
    return sa.Table(name, _metadata, *(sa.Column(c) for c in columns))


# its body_hash is SQLite's: MySQL keeps it with the key, in report_keys
reports = _table("reports", *INSERT_COLUMNS, BODY_HASH)
# MySQL's: a report's key and id, unpartitioned (the reports table is partitioned by day), and its
# submit_time, by which retention forgets the key with the report
report_keys = _table("report_keys", "report_key", "report_id", "submit_time", BODY_HASH)
session_counts = _table("session_counts", "sku", "minute", "kind", "count")
applied_offsets = _table("applied_offsets", "consumer", "topic_partition", "applied", "fingerprint")
applied_events = _table("applied_events", "consumer", "event_id", "applied_at", BODY_HASH)
applied_ranges = _table("applied_ranges", "consumer", "topic_partition", "first_offset", "last_offset", "applied_at")
boards = _table("boards", "board", "sort_order", "operator", "reset_schedule", "epochs", "ties", "keep_seasons",
                "starts_at", "ends_at", "max_attempts", "max_players")
board_seasons = _table("board_seasons", "board", "season_start")
rank_scores = _table("rank_scores", "board", "player_id", "score", "metadata", "tiebreak", "hidden")
banned_players = _table("banned_players", "player_id", "banned_at")
rank_nodes = _table("rank_nodes", "board", "level", "prefix", "count")
rank_tie_nodes = _table("rank_tie_nodes", "board", "score", "level", "prefix", "count")
# shared migrations' (adapters/sql/shared/)
projects = _table("projects", "project_id", "sku", "updated_at")
awaiting_symbols = _table("awaiting_symbols", "symbol_path", "report_key", "added_at")
release_sessions = _table("release_sessions", "sku", "build", "minute", "status", "count")
release_builds = _table("release_builds", "sku", "build", "first_seen", "last_seen")
release_players = _table("release_players", "sku", "build", "day", "crashed", "player")
release_sketches = _table("release_sketches", "sku", "build", "day", "crashed", "registers")
crash_issues = _table("crash_issues", "sku", "signature", "state", "build", "ignore_until", "ignore_count", "episode",
                      "first_seen", "changed_at", "changed_by", "ignore_for", "ignore_for_at")
crash_issue_history = _table("crash_issue_history", "sku", "signature", "seq", "state", "build", "ignore_until",
                             "ignore_count", "changed_at", "changed_by")
crash_grouping_rules = _table("crash_grouping_rules", "sku", "skip_globs", "join_globs", "version", "updated_at",
                              "updated_by")
crash_merges = _table("crash_merges", "sku", "signature", "into_signature", "merged_at", "merged_by")
tournament_seasons = _table("tournament_seasons", "board", "players")
tournament_players = _table("tournament_players", "board", "player_id", "attempts")
tournament_attempts = _table("tournament_attempts", "event_id", "board", "player_id", "attempt", "received_at",
                             "body_hash")
webhook_alerts = _table("webhook_alerts", "alert_key", "kind", "created_at", "body", "sku", "closed_at")
alert_episodes = _table("alert_episodes", "episode_key", "kind", "opened_at")
alert_tellers = _table("alert_tellers", "id", "told_at")
announcements = _table("announcements", "announcement_key", "announced_at")
webhooks = _table("webhooks", "name", "url", "secret", "kinds", "updated_at")
webhook_deliveries = _table("webhook_deliveries", "webhook", "alert_key", "status", "attempts", "next_attempt",
                            "last_code", "last_error", "updated_at")
