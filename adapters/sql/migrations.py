"""Versioned schema migrations, one tool for MySQL and an embedded SQLite file: each `NNNN_*.sql`
of a folder is applied once, in order, and recorded in `schema_migrations`; sqlparse splits a file
into statements (a `;` inside a string or a comment is not an end).

The crash index, counters and leaderboards have one schema on both engines. Each engine's folder
made it (its first files, in its own dialect); what changes it since is one migration in `shared/`,
written in SQL both take (`ALTER TABLE reports ADD COLUMN gpu VARCHAR(256)`, `CREATE INDEX ...`),
applied by both after their own and recorded as `shared/NNNN_*.sql`."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

import sqlalchemy as sa

from adapters.sql.statements import Statement

# the same in MySQL and SQLite
CREATE_TABLE = ("CREATE TABLE IF NOT EXISTS schema_migrations (version VARCHAR(255) PRIMARY KEY, "
                "applied_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)")
SELECT_APPLIED = "SELECT version FROM schema_migrations"
RECORD = Statement(sa.insert(sa.table("schema_migrations", sa.column("version")))
                   .values(version=sa.bindparam("version")))
SHARED = resources.files("adapters.sql") / "shared"


@dataclass(frozen=True)
class Migration:
    name: str
    statements: tuple[str, ...]


def statements(text: str) -> tuple[str, ...]:
    """The statements of a migration file, without those that are only comments."""
    import sqlparse  # noqa: PLC0415 - only a migrating process needs it, not serve's workers (1.2 MB)

    return tuple(s for s in sqlparse.split(text) if sqlparse.format(s, strip_comments=True).strip())


def migrations(folder: Traversable, prefix: str = "") -> list[Migration]:
    """The folder's migrations in the order they apply (by name); none for no folder (an install
    holds only the .sql files, and shared/ has none yet)."""
    if not folder.is_dir():
        return []
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return [Migration(prefix + f.name, statements(f.read_text())) for f in files]


def index_migrations(engine: Traversable) -> list[Migration]:
    """The index schema's migrations on one engine: the engine's own, then the shared ones."""
    return migrations(engine) + migrations(SHARED, "shared/")
