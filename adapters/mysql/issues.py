"""Crash issues and the webhooks' outbox on MySQL, in the crash index's schema."""

from __future__ import annotations

from adapters.errors import port_errors
from adapters.mysql.database import mysql_meaning
from adapters.sql.issues import SqlIssueStore


@port_errors("issues", mysql_meaning)
class MysqlIssueStore(SqlIssueStore):
    pass
