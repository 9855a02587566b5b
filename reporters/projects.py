"""Projects: the number a native crash reporter's upload URL names (a Sentry DSN's last part) and
the sku it stands for. Set with a server key, read by the native ingestion on every upload, from a
copy of a minute's age at most."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, with_config
from typing_extensions import TypedDict

from ports import Project as Stored
from ports import ProjectStore
from ports.cursors import Kind, decode_cursor, page_of
from ports.errors import InvalidField, NotFound, StoreUnavailable
from ports.limits import Sku, ascii_int
from ports.timeutil import Time, now_ms, to_rfc3339

# a Sentry project id is a positive number; bounded where JavaScript still holds it exactly
MAX_PROJECT_ID = 2**53 - 1
ProjectId = Annotated[int, Field(ge=1, le=MAX_PROJECT_ID)]
MAX_PROJECTS = 1000
_CURSOR_KIND = Kind.PROJECTS
# how old the copy of a project an upload is checked against may be: a project moved to another
# sku takes this long to reach every process; a store that is away meanwhile is not noticed. A
# project found missing is asked for again sooner: one created a moment later is soon in use
FRESH_S = 60.0
MISSING_FRESH_S = 5.0
# projects a process remembers, the least recently used let go first: uploads to made-up project
# ids cannot grow it
MAX_KNOWN = 4096


class ProjectBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    sku: Sku


@with_config(ConfigDict(extra="forbid"))
class Project(TypedDict):
    projectId: ProjectId
    sku: str
    updatedAt: Time


@with_config(ConfigDict(extra="forbid"))
class ProjectPage(TypedDict):
    projects: list[Project]
    nextCursor: str | None


def _answer(project: Stored) -> Project:
    return {"projectId": project.project_id, "sku": project.sku, "updatedAt": to_rfc3339(project.updated_at)}


def put(store: ProjectStore, project_id: int, body: ProjectBody) -> tuple[bool, Project]:
    """Creates the project (True) or points it at the body's sku."""
    project = Stored(project_id, body.sku, now_ms())
    return store.put(project), _answer(project)


def get(store: ProjectStore, project_id: int) -> Project:
    found = store.get(project_id)
    if found is None:
        raise NotFound(f"no project {project_id}")
    return _answer(found)


def listing(store: ProjectStore, *, limit: int = 100, cursor: str | None = None) -> ProjectPage:
    position = decode_cursor(cursor, _CURSOR_KIND)
    after_id = 0 if position is None else ascii_int(position, 0, MAX_PROJECT_ID)
    if after_id is None:
        raise InvalidField("cursor is not one this listing gave out", "cursor")
    page, after = page_of(store.projects(after_id, limit + 1), limit, _CURSOR_KIND,
                          lambda last: str(last.project_id))
    return {"projects": [_answer(p) for p in page], "nextCursor": after}


def unknown_project(project_id: int) -> NotFound:
    """The contract's 404 for a project id nobody holds (or, to a title key, another title's)."""
    return NotFound(f"no project {project_id}; a server key creates it with PUT /v1/projects/{project_id}")


class Skus:
    """Each project's sku as an upload needs it: read from the store at most once a FRESH_S per
    project and process (a missing one once a MISSING_FRESH_S). While the store is away, a project
    read before keeps its last sku (an upload is not refused because a store it barely needs is
    down); one never read is 503. Projects found and projects missing are remembered apart, so
    uploads to made-up ids push out only other made-up ids."""

    def __init__(self, store: ProjectStore, fresh_s: float = FRESH_S, missing_fresh_s: float = MISSING_FRESH_S,
                 max_known: int = MAX_KNOWN) -> None:
        self._store = store
        self._fresh_s, self._missing_fresh_s = fresh_s, missing_fresh_s
        self._max_known = max_known
        # project id → (its sku, or None when missing; when read), least recently used first
        self._found: OrderedDict[int, tuple[str | None, float]] = OrderedDict()
        self._missing: OrderedDict[int, tuple[str | None, float]] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, project_id: int) -> str:
        """The project's sku, or the contract's 404 (no such project)."""
        with self._lock:
            known = self._found.get(project_id) or self._missing.get(project_id)
            if project_id in self._found:
                self._found.move_to_end(project_id)
        now = time.monotonic()
        if known is None or now - known[1] >= (self._fresh_s if known[0] else self._missing_fresh_s):
            try:
                found = self._store.get(project_id)
            except StoreUnavailable:
                if known is None:
                    raise
            else:
                known = (None if found is None else found.sku, now)
                self._remember(project_id, known)
        sku = known[0]
        if sku is None:
            raise unknown_project(project_id)
        return sku

    def _remember(self, project_id: int, known: tuple[str | None, float]) -> None:
        keep, other = (self._missing, self._found) if known[0] is None else (self._found, self._missing)
        with self._lock:
            other.pop(project_id, None)
            keep[project_id] = known
            keep.move_to_end(project_id)
            while len(keep) > self._max_known:
                keep.popitem(last=False)
