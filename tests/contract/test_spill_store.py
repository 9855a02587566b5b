"""The spill store's contract, on a local directory and on S3 (moto: no S3 runs here)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.spill.codec import spilled_at_ms
from adapters.spill.directory import DirectorySpillStore
from adapters.spill.s3 import S3SpillStore
from ports import OutgoingRecord, SpillStore
from ports.timeutil import now_ms
from tests.conftest import s3_bucket


@pytest.fixture(params=["directory", "s3"])
def spill_store(request: pytest.FixtureRequest, tmp_path: Path,
                monkeypatch: pytest.MonkeyPatch) -> Iterator[SpillStore]:
    if request.param == "directory":
        yield DirectorySpillStore(tmp_path / "spill")
        return
    with s3_bucket(monkeypatch, "spill") as client:
        yield S3SpillStore(client, "spill")


def test_put_list_delete_keeps_records_exactly_and_oldest_first(spill_store: SpillStore):
    records = [OutgoingRecord(value=bytes([i]) * 3, key=None if i % 2 else b"k", headers=(("eventId", b"\x00\xff"),))
               for i in range(5)]
    for i, record in enumerate(records):
        spill_store.put("crashes" if i < 3 else "sessions", record)
    listed = spill_store.list(limit=100)
    assert [s.record for s in listed] == records
    assert [s.topic for s in listed] == ["crashes"] * 3 + ["sessions"] * 2
    assert [s.record for s in spill_store.list(limit=2)] == records[:2]
    spill_store.delete(listed[0].spill_id)
    spill_store.delete(listed[0].spill_id)  # twice is harmless
    assert [s.record for s in spill_store.list(limit=100)] == records[1:]


def test_empty(spill_store: SpillStore):
    assert spill_store.list(limit=10) == []


def test_purge_drops_what_was_spilled_before_the_cut(spill_store: SpillStore):
    spill_store.put("crashes", OutgoingRecord(value=b"old"))
    time.sleep(0.01)
    cut = now_ms()
    time.sleep(0.01)
    spill_store.put("crashes", OutgoingRecord(value=b"new"))
    assert spill_store.purge(cut) == 1
    assert [s.record.value for s in spill_store.list(limit=10)] == [b"new"]
    assert spill_store.purge(cut) == 0


def test_a_spill_set_aside_is_listed_no_more_and_goes_with_retention(spill_store: SpillStore):
    for value in (b"first", b"refused", b"third"):
        spill_store.put("crashes", OutgoingRecord(value=value))
        time.sleep(0.002)  # each in a millisecond of its own
    refused = spill_store.list(limit=10)[1]
    assert spill_store.set_aside(refused.spill_id)
    # found in review: by two replays at once, the second raised; then both counted it
    assert not spill_store.set_aside(refused.spill_id)
    assert [s.record.value for s in spill_store.list(limit=10)] == [b"first", b"third"]
    assert [s.record.value for s in spill_store.list(limit=1)] == [b"first"]
    assert spill_store.purge(spilled_at_ms(refused.spill_id)) == 1  # the first
    assert spill_store.purge(now_ms() + 1) == 2


@pytest.fixture(params=["directory", "s3"])
def store_and_place(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                    ) -> Iterator[tuple[SpillStore, Callable[[str, bytes], object]]]:
    """A spill store, and a way to put a file (an object) under its place that it did not write."""
    if request.param == "directory":
        yield DirectorySpillStore(tmp_path / "spill"), lambda name, body: (tmp_path / "spill" / name).write_bytes(body)
        return
    with s3_bucket(monkeypatch, "spill") as client:
        yield S3SpillStore(client, "spill"), lambda name, body: client.put_object(Bucket="spill", Key=f"spill/{name}",
                                                                                   Body=body)


def test_what_does_not_read_as_a_spill_stops_neither_listing_nor_purge(
        store_and_place: tuple[SpillStore, Callable[[str, bytes], object]]):
    """Found in review: a file of another name made the purge raise, before it reached the documents,
    the index and the counters; one that did not decode made every listing raise, so no spill after
    it was ever replayed."""
    spill_store, foreign = store_and_place
    spill_store.put("crashes", OutgoingRecord(value=b"first"))
    foreign("notes.json", b"{}")
    foreign("00000000000000000001-000000000-crashes-deadbeef0000.json", b'{"topic": "cra')
    spill_store.put("sessions", OutgoingRecord(value=b"second"))
    assert [s.record.value for s in spill_store.list(limit=10)] == [b"first", b"second"]
    assert [s.record.value for s in spill_store.list(limit=1)] == [b"first"]
    assert spill_store.purge(now_ms() + 1) == 3  # the one set aside too
    assert spill_store.list(limit=10) == []


def test_a_set_aside_spill_file_goes_with_retention(tmp_path: Path) -> None:
    """Found in review: a spill file set aside as unreadable was kept for good (S3's are under the
    bucket's lifecycle rule)."""
    store = DirectorySpillStore(tmp_path / "spill")
    spill_id = "00000000000000000001-000000000-crashes-deadbeef0000"
    (tmp_path / "spill" / f"{spill_id}.json").write_bytes(b"{")
    assert store.list(limit=10) == []
    assert [p.name for p in (tmp_path / "spill").iterdir()] == [f".{spill_id}.unreadable"]
    assert store.purge(now_ms()) == 1
    assert list((tmp_path / "spill").iterdir()) == []


def test_a_spill_another_replay_deleted_meanwhile_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found in review: a spill another replay (an operator's `blackbox replay`, a second invocation)
    deleted between the listing and the read made the listing raise NoSuchKey, and the replay stop;
    the directory's store passes such a file over."""
    with s3_bucket(monkeypatch, "spill") as client:
        store = S3SpillStore(client, "spill")
        for value in (b"first", b"taken", b"third"):
            store.put("crashes", OutgoingRecord(value=value))
            time.sleep(0.002)
        taken = f"spill/{store.list(limit=10)[1].spill_id}.json"

        class Racing:
            """The client, with the other replay's delete landing just before the read of `taken`."""

            def get_object(self, **request: Any) -> Any:
                if request["Key"] == taken:
                    client.delete_object(Bucket="spill", Key=taken)
                return client.get_object(**request)

            def __getattr__(self, name: str) -> Any:
                return getattr(client, name)

        assert [s.record.value for s in S3SpillStore(Racing(), "spill").list(limit=10)] == [b"first", b"third"]


def test_an_unreadable_spill_another_replay_set_aside_meanwhile_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found in review: two replays that both read an object that does not decode both set it
    aside; the second one's copy found it gone, and its replay stopped."""
    with s3_bucket(monkeypatch, "spill") as client:
        store = S3SpillStore(client, "spill")
        store.put("crashes", OutgoingRecord(value=b"first"))
        broken = "spill/00000000000000000001-000000000-crashes-deadbeef0000.json"
        client.put_object(Bucket="spill", Key=broken, Body=b'{"topic": "cra')

        class Racing:
            """The client, with the other replay's set-aside landing just before this one's copy."""

            def copy_object(self, **request: Any) -> Any:
                if request["CopySource"]["Key"] == broken and "Contents" in client.list_objects_v2(
                        Bucket="spill", Prefix=broken):
                    client.copy_object(**request)
                    client.delete_object(Bucket="spill", Key=broken)
                return client.copy_object(**request)

            def __getattr__(self, name: str) -> Any:
                return getattr(client, name)

        assert [s.record.value for s in S3SpillStore(Racing(), "spill").list(limit=10)] == [b"first"]

