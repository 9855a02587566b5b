"""The symbol store's contract, on a local directory and on S3 (moto: no S3 runs here), against a
dict as the model."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.symbols.directory import DirectorySymbolStore
from adapters.symbols.s3 import S3SymbolStore
from ports import SymbolFile, SymbolStore
from tests.conftest import s3_bucket

BUCKET = "blackbox-spill"


class OneCallAtATime:
    """An S3 client whose calls moto serves one at a time: its in-memory S3 is not thread-safe (a
    put closes the buffer a concurrent get of the same key reads, which failed a CI run), as S3 is."""

    def __init__(self, client: Any) -> None:
        self._client, self._lock = client, threading.Lock()

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._client, name)
        if not callable(call):
            return call

        def serialized(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return call(*args, **kwargs)

        return serialized


@pytest.fixture(params=["directory", "s3"])
def symbol_store(request: pytest.FixtureRequest, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch) -> Iterator[SymbolStore]:
    if request.param == "directory":
        yield DirectorySymbolStore(tmp_path / "symbols")
        return
    with s3_bucket(monkeypatch, BUCKET) as client:
        # the bucket is shared: keys on either side of the prefix are none of the store's
        for key in ("spill/1.json", "symbols", "tmp/x/y/z.sym"):
            client.put_object(Bucket=BUCKET, Key=key, Body=b"not a symbol file")
        yield S3SymbolStore(OneCallAtATime(client), BUCKET, tmp_path / "cache")


GAME = "game.pdb/0123456789ABCDEF0123456789ABCDEF1/game.sym"
LIBC = "libc.so.6/0A1B2C3D4E5F60718293A4B5C6D7E8F90/libc.so.6.sym"


def copies(store: SymbolStore) -> bool:
    """Whether `local` makes a copy, and so can change it: the directory store hands out its own
    root, which a walk reads as the store is, and so never changes anything."""
    return not isinstance(store, DirectorySymbolStore)


def held(directory: Path, paths: Sequence[str]) -> dict[str, bytes]:
    """What the directory holds of these paths."""
    return {path: (directory / path).read_bytes() for path in paths if (directory / path).is_file()}


def test_a_put_is_new_once_then_replaces(symbol_store: SymbolStore):
    assert symbol_store.files("", 10) == []
    assert symbol_store.put(GAME, b"MODULE windows x86_64 0123 game.pdb\n", 1_700_000_000_123) is True
    assert symbol_store.files("", 10) == [SymbolFile(GAME, 36, 1_700_000_000_123)]
    assert symbol_store.put(GAME, b"MODULE v2\n", 1_700_000_000_456) is False
    assert symbol_store.files("", 10) == [SymbolFile(GAME, 10, 1_700_000_000_456)]
    directory, _ = symbol_store.local([GAME])
    assert held(directory, [GAME]) == {GAME: b"MODULE v2\n"}


def test_files_page_by_path_after_the_last_one(symbol_store: SymbolStore):
    # '.' sorts before '/': a.x/… comes before a/…, which a walk of the tree level by level would reverse
    paths = [GAME, LIBC, "a/B/a.sym", "a.x/B/a.sym", "a/A/a.sym", "Z/1/Z.sym", "é.pdb/1/é.sym"]
    for n, path in enumerate(paths):
        symbol_store.put(path, bytes(n), n)
    everything = symbol_store.files("", 100)
    assert [f.path for f in everything] == sorted(paths)
    assert [(f.size_bytes, f.uploaded_at) for f in everything] == [(paths.index(f.path),) * 2 for f in everything]
    sizes, paged, after = [], [], ""
    while page := symbol_store.files(after, 3):
        sizes.append(len(page))
        paged += page
        after = page[-1].path
    assert sizes == [3, 3, 1] and paged == everything
    assert symbol_store.files("b", 100) == [f for f in everything if f.path > "b"]
    assert symbol_store.files("", 0) == []


def test_delete_says_whether_there_was_a_file(symbol_store: SymbolStore):
    symbol_store.put(GAME, b"a", 1)
    symbol_store.put(LIBC, b"b", 2)
    assert symbol_store.delete(GAME) is True
    assert symbol_store.delete(GAME) is False
    assert symbol_store.delete("never.pdb/1/never.sym") is False
    assert [f.path for f in symbol_store.files("", 10)] == [LIBC]
    assert symbol_store.put(GAME, b"again", 3) is True


def test_local_holds_the_asked_files_as_stored_and_says_when_that_changed(symbol_store: SymbolStore):
    asked, news = [GAME, LIBC], copies(symbol_store)
    directory, changed = symbol_store.local(asked)
    assert held(directory, asked) == {} and changed is False
    symbol_store.put(GAME, b"game v1", 1)
    assert symbol_store.local(asked) == (directory, news)
    assert held(directory, asked) == {GAME: b"game v1"}
    assert symbol_store.local(asked) == (directory, False)
    symbol_store.put(LIBC, b"libc", 2)
    assert symbol_store.local([GAME]) == (directory, False)  # not asked: no news
    assert symbol_store.local(asked) == (directory, news)
    symbol_store.put(GAME, b"game v2", 3)
    assert symbol_store.local(asked) == (directory, news)
    assert held(directory, asked) == {GAME: b"game v2", LIBC: b"libc"}
    assert symbol_store.local(asked) == (directory, False)
    symbol_store.delete(GAME)
    assert symbol_store.local(asked) == (directory, news)
    assert held(directory, asked) == {LIBC: b"libc"}
    assert symbol_store.local(asked) == (directory, False)
    assert symbol_store.local([]) == (directory, False)


def test_a_reader_of_the_local_copy_sees_one_whole_file_or_the_other(symbol_store: SymbolStore):
    versions = [b"A" * 300_000, b"B" * 200_000]
    symbol_store.put(GAME, versions[0], 0)
    done = threading.Event()

    def replace() -> None:
        for n in range(30):
            symbol_store.put(GAME, versions[n % 2], n)
        done.set()

    writer = threading.Thread(target=replace)
    writer.start()
    reads = 0
    while not done.is_set() or reads == 0:
        directory, _ = symbol_store.local([GAME])
        assert (directory / GAME).read_bytes() in versions
        reads += 1
    writer.join()


ZLIB = "libz.so.1/00112233445566778899AABBCCDDEEFF0/libz.so.1.sym"


@pytest.fixture
def s3_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3SymbolStore]:
    with s3_bucket(monkeypatch, BUCKET) as client:
        yield S3SymbolStore(client, BUCKET, tmp_path / "cache", cache_bytes=100)


def cached(store: S3SymbolStore) -> set[str]:
    directory, _ = store.local([])
    return {str(path.relative_to(directory)) for path in directory.rglob("*.sym")}


def test_the_s3_cache_keeps_its_bytes_dropping_the_files_least_recently_asked_for(s3_cache: S3SymbolStore):
    """Found from outside: a warm walker's container kept every file it fetched, tens of MB each,
    until its /tmp filled and every batch routed to it failed (ENOSPC), for as long as it lived."""
    for path, byte in ((GAME, b"g"), (LIBC, b"c"), (ZLIB, b"z")):
        s3_cache.put(path, byte * 40, 1)
    s3_cache.local([GAME])
    s3_cache.local([LIBC])
    s3_cache.local([GAME])
    directory, _ = s3_cache.local([ZLIB])
    assert cached(s3_cache) == {GAME, ZLIB}  # LIBC was the least recently asked for
    assert held(directory, [GAME, ZLIB]) == {GAME: b"g" * 40, ZLIB: b"z" * 40}
    assert s3_cache.local([LIBC]) == (directory, True)  # fetched again, whole
    assert cached(s3_cache) == {ZLIB, LIBC}
    assert held(directory, [LIBC]) == {LIBC: b"c" * 40}


def test_the_s3_cache_holds_what_one_walk_asks_for_past_its_bytes(s3_cache: S3SymbolStore):
    for path in (GAME, LIBC, ZLIB):
        s3_cache.put(path, b"x" * 40, 1)
    directory, _ = s3_cache.local([GAME, LIBC, ZLIB])
    assert held(directory, [GAME, LIBC, ZLIB]) == dict.fromkeys((GAME, LIBC, ZLIB), b"x" * 40)
    s3_cache.local([GAME])
    assert cached(s3_cache) == {GAME, LIBC, ZLIB}  # nothing new to make room for
    s3_cache.put(LIBC, b"y" * 40, 2)
    s3_cache.local([LIBC])  # a new version beside the old until it replaces it: the others make room
    assert cached(s3_cache) == {LIBC}


def test_a_fetch_that_fails_midway_leaves_no_partial_file(s3_cache: S3SymbolStore,
                                                          monkeypatch: pytest.MonkeyPatch):
    s3_cache.put(GAME, b"g" * 40, 1)

    def full(*_: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        s3_cache.local([GAME])
    directory, _ = s3_cache.local([])
    assert [path.name for path in directory.rglob("*") if path.is_file()] == []


def test_the_s3_cache_counts_and_drops_what_an_earlier_process_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Found in review: a Lambda runtime restarted after a timeout keeps its /tmp, whose copies the
    new process neither counted nor evicted, nor the partial file of the fetch it died in."""
    left = tmp_path / "cache" / GAME
    left.parent.mkdir(parents=True)
    left.write_bytes(b"g" * 60)
    (left.parent / ".x.partial").write_bytes(b"half")
    with s3_bucket(monkeypatch, BUCKET) as client:
        store = S3SymbolStore(client, BUCKET, tmp_path / "cache", cache_bytes=100)
        for path in (LIBC, ZLIB):
            store.put(path, b"x" * 40, 1)
        store.local([LIBC])
        store.local([ZLIB])
        assert cached(store) == {LIBC, ZLIB}
        assert not list((tmp_path / "cache").rglob("*.partial"))


def test_a_copy_whose_new_version_failed_to_arrive_is_still_dropped_in_turn(s3_cache: S3SymbolStore,
                                                                           monkeypatch: pytest.MonkeyPatch):
    s3_cache.put(GAME, b"g" * 40, 1)
    s3_cache.local([GAME])
    s3_cache.put(GAME, b"h" * 40, 2)
    with monkeypatch.context() as m:
        m.setattr(os, "fsync", lambda *_: (_ for _ in ()).throw(OSError(28, "No space left on device")))
        with pytest.raises(OSError):
            s3_cache.local([GAME])
    for path in (LIBC, ZLIB):
        s3_cache.put(path, b"x" * 40, 1)
    s3_cache.local([LIBC])
    s3_cache.local([ZLIB])
    assert cached(s3_cache) == {LIBC, ZLIB}


BAD_PATHS = ["", "/etc/x/passwd.sym", "../x/y.sym", "a/../y.sym", "a/./y.sym", "a//y.sym", "a\\b/c/d.sym",
             "a/b/c\0.sym", "a/b.sym", "a/b/c/d.sym", "a/b/c.txt", "a/b/"]


@pytest.mark.parametrize("path", BAD_PATHS)
def test_a_path_outside_the_layout_is_refused(symbol_store: SymbolStore, path: str):
    with pytest.raises(ValueError, match="not a symbol file path"):
        symbol_store.put(path, b"x", 1)
    with pytest.raises(ValueError, match="not a symbol file path"):
        symbol_store.delete(path)
    with pytest.raises(ValueError, match="not a symbol file path"):
        symbol_store.local([GAME, path])
    assert symbol_store.files("", 10) == []


def test_a_delete_leaves_no_empty_directory(tmp_path: Path):
    """The directory store's own layout: the walker and a listing find nothing left behind."""
    store = DirectorySymbolStore(tmp_path)
    other = "game.pdb/FEDCBA/game.sym"
    store.put(GAME, b"a", 1)
    store.put(other, b"b", 2)
    store.delete(GAME)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "game.pdb", "game.pdb/FEDCBA", other]
    store.delete(other)
    assert list(tmp_path.iterdir()) == []


def test_a_page_reads_the_directories_that_may_hold_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Left alone in a note, then mended: each page of the directory store's listing read every
    directory of the layout (12,000 files were 24,000 directories a page)."""
    store = DirectorySymbolStore(tmp_path)
    paths = sorted(f"m{n:02}.so/{n:032X}/m{n:02}.so.sym" for n in range(60))
    for at, path in enumerate(paths):
        store.put(path, b"MODULE", at)
    read: list[str] = []
    scandir = os.scandir

    def counted(path: Any = ".") -> Any:
        read.append(str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", counted)
    assert [f.path for f in store.files(paths[30], 2)] == paths[31:33]
    assert len(read) <= 1 + 2 * 3, read  # the root, and after's module and the page's, two levels each


def test_a_listing_holds_files_alone(tmp_path: Path):
    """Found in review: a FIFO named as a symbol file was listed (the walk before took files alone)."""
    store = DirectorySymbolStore(tmp_path)
    store.put(GAME, b"MODULE", 1)
    fifo = tmp_path / "pipe.so" / "ABC" / "pipe.so.sym"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    assert [f.path for f in store.files("", 10)] == [GAME]


def test_puts_and_deletes_of_one_file_at_once_never_fail(tmp_path: Path):
    """Found from outside: a delete removing the emptied directories while a put made or synced
    them failed the put (FileExistsError, FileNotFoundError: 500). The directory store's own."""
    store = DirectorySymbolStore(tmp_path)
    failures: list[BaseException] = []

    def turns(first: int) -> None:
        try:
            for n in range(first, first + 1000):
                _ = store.put(GAME, b"MODULE", 1) if n % 2 else store.delete(GAME)
        except Exception as error:
            failures.append(error)

    threads = [threading.Thread(target=turns, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    store.delete(GAME)
    assert list(tmp_path.iterdir()) == []


def test_a_put_where_a_file_holds_its_directorys_name_fails_and_does_not_spin(tmp_path: Path):
    """Found in review: the retry of a put whose directory a delete removed also took a file in the
    directory's place for that race, and tried again for good."""
    store = DirectorySymbolStore(tmp_path)
    in_the_way = tmp_path / GAME.rsplit("/", 1)[0]
    in_the_way.parent.mkdir()
    in_the_way.write_bytes(b"")
    failed: list[BaseException] = []

    def put() -> None:
        try:
            store.put(GAME, b"MODULE", 1)
        except OSError as error:
            failed.append(error)

    thread = threading.Thread(target=put, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive() and len(failed) == 1


PATHS = [GAME, LIBC, "a/A/a.sym", "a/B/a.sym", "a.x/A/a.sym", "a-x/A/a.sym", "a/A.B/a.sym", ".a/A/.a.sym"]
Op = tuple[str, str, int]  # put, delete or local; the path; the size put


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from(["put", "delete", "local"]), st.sampled_from(PATHS),
                              st.integers(0, 64)), max_size=25),
       after=st.sampled_from(["", *PATHS]), limit=st.integers(1, 6))
def test_puts_and_deletes_behave_like_a_dict(symbol_store: SymbolStore, ops: list[Op], after: str, limit: int):
    # the store outlives examples: empty it, and make the local copy agree
    for file in symbol_store.files("", 100):
        symbol_store.delete(file.path)
    symbol_store.local(PATHS)
    model: dict[str, tuple[bytes, int]] = {}
    seen: dict[str, bytes] = {}  # what the last local() held

    def check_local() -> None:
        nonlocal seen
        directory, changed = symbol_store.local(PATHS)
        now = {path: data for path, (data, _) in model.items()}
        assert held(directory, PATHS) == now
        assert changed is (copies(symbol_store) and now != seen)
        seen = now

    for n, (op, path, size) in enumerate(ops):
        if op == "put":
            data = f"{n}:".encode() + b"x" * size  # each put's bytes its own: a replace is a change
            assert symbol_store.put(path, data, n) is (path not in model)
            model[path] = (data, n)
        elif op == "delete":
            assert symbol_store.delete(path) is (model.pop(path, None) is not None)
        else:
            check_local()
    expected = [SymbolFile(path, len(data), at) for path, (data, at) in sorted(model.items())]
    assert symbol_store.files("", 100) == expected
    assert symbol_store.files(after, limit) == [f for f in expected if f.path > after][:limit]
    check_local()
