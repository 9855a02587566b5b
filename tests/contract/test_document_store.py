from __future__ import annotations

import time

from ports import DocumentStore
from ports.limits import MAX_RETENTION_DAYS


def test_upsert_then_get_many(document_store: DocumentStore):
    document_store.upsert_many({"a": b"1", "b": b"\x00\xff" * 1000}, ttl_seconds=60)
    assert document_store.get_many(["a", "b", "missing"]) == {"a": b"1", "b": b"\x00\xff" * 1000}


def test_upsert_replaces(document_store: DocumentStore):
    document_store.upsert_many({"a": b"old"}, ttl_seconds=60)
    document_store.upsert_many({"a": b"new"}, ttl_seconds=60)
    assert document_store.get_many(["a"]) == {"a": b"new"}


def test_expired_documents_are_gone(document_store: DocumentStore):
    document_store.upsert_many({"short": b"x"}, ttl_seconds=1)
    document_store.upsert_many({"long": b"y"}, ttl_seconds=60)
    time.sleep(1.1)
    assert document_store.get_many(["short", "long"]) == {"long": b"y"}


def test_many_keys_at_once(document_store: DocumentStore):
    docs = {f"k{i}": str(i).encode() for i in range(2500)}
    document_store.upsert_many(docs, ttl_seconds=60)
    assert document_store.get_many(list(docs)) == docs


def test_empty_requests(document_store: DocumentStore):
    document_store.upsert_many({}, ttl_seconds=60)
    assert document_store.get_many([]) == {}
    document_store.ping()


def test_purge_of_expired_documents_keeps_the_live_ones(document_store: DocumentStore):
    document_store.upsert_many({"short": b"x"}, ttl_seconds=1)
    document_store.upsert_many({"long": b"y"}, ttl_seconds=60)
    time.sleep(1.1)
    document_store.purge_expired()
    assert document_store.get_many(["short", "long"]) == {"long": b"y"}


def test_delete_many_removes_those_keys_and_ignores_missing_ones(document_store: DocumentStore):
    document_store.upsert_many({"a": b"1", "b": b"2", "c": b"3"}, ttl_seconds=60)
    document_store.delete_many(["a", "c", "never-there"])
    assert document_store.get_many(["a", "b", "c"]) == {"b": b"2"}
    document_store.delete_many([])


def test_a_document_kept_past_2038_is_kept(document_store: DocumentStore):
    """Found in review: Couchbase takes an expiry past 30 days as a Unix time, and one past 2**31 - 1
    (January 2038) as past: a retention of 4,069 days or more made every document expire as written."""
    document_store.upsert_many({"kept": b"z"}, ttl_seconds=MAX_RETENTION_DAYS * 86_400)
    assert document_store.get_many(["kept"]) == {"kept": b"z"}
