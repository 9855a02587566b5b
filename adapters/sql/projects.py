"""The projects of native crash reporters on SQL, alike on SQLite and MySQL: each engine's adapter
is this class with its errors (port_errors)."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.reads import SqlDatabase, Transaction
from adapters.sql.schema import projects
from adapters.sql.statements import Statement, insert
from ports import Project

_COLUMNS = ("project_id", "sku", "updated_at")
_bind = sa.bindparam
_SELECT = sa.select(*(projects.c[c] for c in _COLUMNS))
_GET = Statement(_SELECT.where(projects.c.project_id == _bind("project_id")))
_LIST = Statement(_SELECT.where(projects.c.project_id > _bind("after")).order_by(projects.c.project_id)
                  .limit(_bind("limit")))
_ADD = insert(projects, _COLUMNS, keys=("project_id",))
_MOVE = Statement(sa.update(projects).where(projects.c.project_id == _bind("project_id"))
                  .values(sku=_bind("sku"), updated_at=_bind("updated_at")))


class SqlProjectStore:
    _database: SqlDatabase

    def __init__(self, database: SqlDatabase) -> None:
        self._database = database

    def put(self, project: Project) -> bool:
        def put(t: Transaction) -> bool:
            # added unless taken; then moved (one statement each way, so both engines say which)
            if t.execute(_ADD, vars(project)) == 1:
                return True
            t.execute(_MOVE, vars(project))
            return False

        # PUTs of one new id at once deadlock on MySQL (each insert waits for another's key)
        return self._database.in_transaction(put)

    def get(self, project_id: int) -> Project | None:
        found = self._database.rows(_GET, {"project_id": project_id})
        return Project(*found[0]) if found else None

    def projects(self, after: int, limit: int) -> list[Project]:
        return [Project(*row) for row in self._database.rows(_LIST, {"after": after, "limit": limit})]

    def close(self) -> None:
        self._database.close()
