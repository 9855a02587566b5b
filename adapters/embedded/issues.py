"""Crash issues and the webhooks' outbox on SQLite, beside the crash index, in its file."""

from __future__ import annotations

from adapters.embedded.sqlite import sqlite_meaning
from adapters.errors import port_errors
from adapters.sql.issues import SqlIssueStore


@port_errors("issues", sqlite_meaning)
class SqliteIssueStore(SqlIssueStore):
    pass
