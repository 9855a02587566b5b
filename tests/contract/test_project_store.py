"""The ProjectStore contract, on SQLite and MariaDB alike, against a dict as the model."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ports import Project, ProjectStore
from tests.at_once import at_once

INT64_MAX = 2**63 - 1


def test_a_project_is_put_read_back_and_moved(project_store: ProjectStore) -> None:
    assert project_store.get(7) is None
    assert project_store.put(Project(7, "skyrift:pc", 1_000)) is True
    assert project_store.get(7) == Project(7, "skyrift:pc", 1_000)
    assert project_store.put(Project(7, "skyrift:ps5", 2_000)) is False
    assert project_store.get(7) == Project(7, "skyrift:ps5", 2_000)
    assert project_store.put(Project(INT64_MAX, "kart:pc", 3)) is True
    assert project_store.get(INT64_MAX) == Project(INT64_MAX, "kart:pc", 3)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(puts=st.lists(st.tuples(st.integers(1, 40), st.sampled_from(["a:pc", "b:pc", "c.d-2"])), max_size=30),
       after=st.integers(0, 41), limit=st.integers(1, 10))
def test_listing_pages_by_id_like_a_dict(project_store: ProjectStore, puts: list[tuple[int, str]],
                                         after: int, limit: int) -> None:
    # the store outlives examples: the model starts from what is there
    model = {p.project_id: p.sku for p in project_store.projects(0, 1_000)}
    for n, (project_id, sku) in enumerate(puts):
        assert project_store.put(Project(project_id, sku, n)) is (project_id not in model)
        model[project_id] = sku
    page = project_store.projects(after, limit)
    assert [(p.project_id, p.sku) for p in page] == sorted((i, s) for i, s in model.items() if i > after)[:limit]



def test_puts_of_a_new_project_at_once_make_it_once(project_store: ProjectStore) -> None:
    """Found from outside: on MariaDB six PUTs of one new id at once deadlocked, and 52 of 120 such
    requests answered 503."""
    for project_id in range(500, 508):
        made = at_once(6, lambda i, p=project_id: project_store.put(Project(p, f"s{i}:pc", i)))  # type: ignore[misc]
        assert made.count(True) == 1
        assert project_store.get(project_id) is not None
