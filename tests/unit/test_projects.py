"""Projects as native ingestion reads them: a project's sku from a copy at most FRESH_S old, the
last one kept while the store is away, an unknown project the contract's 404 (and remembered as
unknown for as long); the listing pages by id."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.embedded.index import SqliteIndexDatabase, SqliteProjectStore
from ports import Project, ProjectStore
from ports.errors import InvalidField, NotFound, StoreUnavailable
from reporters import projects
from reporters.projects import ProjectBody, Skus


class Away:
    """The store while it does not answer; then as it was."""

    def __init__(self, store: ProjectStore) -> None:
        self.store, self.away, self.reads = store, False, 0

    def get(self, project_id: int) -> Project | None:
        self.reads += 1
        if self.away:
            raise StoreUnavailable("projects")
        return self.store.get(project_id)


@pytest.fixture
def store(tmp_path: Path) -> SqliteProjectStore:
    return SqliteProjectStore(SqliteIndexDatabase(tmp_path / "index.sqlite"))


def test_a_sku_is_read_once_a_period_and_kept_while_the_store_is_away(store: SqliteProjectStore,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1_000.0]
    monkeypatch.setattr(projects.time, "monotonic", lambda: clock[0])
    store.put(Project(7, "skyrift:pc", 0))
    flaky = Away(store)
    skus = Skus(flaky, fresh_s=60)  # type: ignore[arg-type]  # the one method Skus calls
    assert skus.of(7) == "skyrift:pc"
    store.put(Project(7, "skyrift:ps5", 1))
    clock[0] += 59
    assert (skus.of(7), flaky.reads) == ("skyrift:pc", 1)  # still fresh: not read again
    clock[0] += 1
    assert (skus.of(7), flaky.reads) == ("skyrift:ps5", 2)  # a minute on, the move is seen
    flaky.away = True
    clock[0] += 600
    assert skus.of(7) == "skyrift:ps5"  # the last sku known, not a refused upload
    with pytest.raises(StoreUnavailable):
        skus.of(8)  # never read: nothing to go on


def test_an_unknown_project_is_404_until_it_is_created_and_a_period_passes(store: SqliteProjectStore,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(projects.time, "monotonic", lambda: clock[0])
    skus = Skus(store, fresh_s=60, missing_fresh_s=5)
    with pytest.raises(NotFound, match="PUT /v1/projects/9"):
        skus.of(9)
    created, answer = projects.put(store, 9, ProjectBody(sku="ember:pc"))
    assert created and answer["projectId"] == 9 and answer["sku"] == "ember:pc"
    with pytest.raises(NotFound):
        skus.of(9)  # a flood of uploads to a missing project reads the store once a period
    clock[0] += 5
    assert skus.of(9) == "ember:pc"


def test_made_up_project_ids_neither_grow_what_a_process_remembers_nor_push_out_real_ones(
        store: SqliteProjectStore) -> None:
    for project_id in (1, 2, 3):
        store.put(Project(project_id, "a:pc", 0))
    counting = Away(store)
    skus = Skus(counting, max_known=2)  # type: ignore[arg-type]
    skus.of(1)
    skus.of(2)
    for made_up in range(100, 110):
        with pytest.raises(NotFound):
            skus.of(made_up)
    reads = counting.reads
    assert (skus.of(1), skus.of(2), counting.reads) == ("a:pc", "a:pc", reads)  # still remembered
    counting.away = True
    assert skus.of(2) == "a:pc"  # the store away: what was read before serves
    counting.away = False
    skus.of(3)  # a third real one: the least recently used real one is let go
    counting.away = True
    with pytest.raises(StoreUnavailable):
        skus.of(1)
    with pytest.raises(StoreUnavailable):
        skus.of(100)  # and the made-up ones were let go long ago


def test_the_listing_pages_by_id_and_refuses_a_cursor_it_did_not_give(store: SqliteProjectStore) -> None:
    for project_id in (30, 4, 17):
        projects.put(store, project_id, ProjectBody(sku="a:pc"))
    first = projects.listing(store, limit=2)
    assert [p["projectId"] for p in first["projects"]] == [4, 17] and first["nextCursor"]
    rest = projects.listing(store, limit=2, cursor=first["nextCursor"])
    assert [p["projectId"] for p in rest["projects"]] == [30] and rest["nextCursor"] is None
    with pytest.raises(InvalidField):
        projects.listing(store, cursor="cA")  # a cursor of this kind, but not a number
    with pytest.raises(NotFound):
        projects.get(store, 5)
