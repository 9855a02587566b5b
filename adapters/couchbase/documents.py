"""The document store on Couchbase: raw binary documents with an expiry, written and read in
parallel multi-operations; the cluster object is made once and reused (it pools its connections)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from datetime import timedelta

from couchbase.auth import PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.exceptions import (
    AmbiguousTimeoutException,
    CouchbaseException,
    DocumentNotFoundException,
    InvalidArgumentException,
    RequestCanceledException,
    ServiceUnavailableException,
    TemporaryFailException,
    TimeoutException,
    UnAmbiguousTimeoutException,
    ValueFormatException,
)
from couchbase.options import ClusterOptions, ClusterTimeoutOptions
from couchbase.transcoder import RawBinaryTranscoder

from adapters.errors import Meaning, port_errors

_TRANSCODER = RawBinaryTranscoder()
_CHUNK = 1000  # keys per multi-operation
# the last second a document can be kept to: the server's expiry is a 32-bit Unix time
LAST_EXPIRY = 2**31 - 1
_PING_KEY = "blackbox:ping"


_UNAVAILABLE = (TimeoutException, AmbiguousTimeoutException, UnAmbiguousTimeoutException, ServiceUnavailableException,
                TemporaryFailException, RequestCanceledException)


def couchbase_meaning(error: BaseException) -> Meaning | None:
    """Couchbase's errors in the ports' words (adapters.errors)."""
    if isinstance(error, InvalidArgumentException | ValueFormatException):
        return Meaning.VALUE
    if isinstance(error, _UNAVAILABLE):
        return Meaning.UNAVAILABLE
    return None


def _raise_first(exceptions: Mapping[str, CouchbaseException], operation: str) -> None:
    """The first failure of a multi-operation, but for keys that are not there (no error here)."""
    for key, error in exceptions.items():
        if not isinstance(error, DocumentNotFoundException):
            error.add_note(f"{operation} of {key} failed")
            raise error


@port_errors("documents", couchbase_meaning)
class CouchbaseDocumentStore:
    def __init__(self, url: str, bucket: str, username: str, password: str, key_prefix: str = "") -> None:
        """`key_prefix` lets several deployments share one bucket."""
        self._prefix = key_prefix
        options = ClusterOptions(
            PasswordAuthenticator(username, password),
            timeout_options=ClusterTimeoutOptions(
                kv_timeout=timedelta(seconds=10), connect_timeout=timedelta(seconds=20)
            ),
        )
        self._cluster = Cluster(url, options)
        self._collection = self._cluster.bucket(bucket).default_collection()

    def upsert_many(self, documents: Mapping[str, bytes], ttl_seconds: int) -> None:
        items = [(self._prefix + key, body) for key, body in documents.items()]
        # an expiry past 30 days goes as a Unix time, which the server reads as 32 bits: one past
        # January 2038 would be taken as past, and the document expire as written
        expiry = timedelta(seconds=min(ttl_seconds, LAST_EXPIRY - int(time.time())))
        for start in range(0, len(items), _CHUNK):
            result = self._collection.upsert_multi(
                dict(items[start : start + _CHUNK]), expiry=expiry, transcoder=_TRANSCODER
            )
            _raise_first(result.exceptions, "upsert")

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        unique = list(dict.fromkeys(self._prefix + key for key in keys))
        for start in range(0, len(unique), _CHUNK):
            result = self._collection.get_multi(unique[start : start + _CHUNK], transcoder=_TRANSCODER)
            _raise_first(result.exceptions, "get")
            found.update((key[len(self._prefix) :], bytes(r.value)) for key, r in result.results.items())
        return found

    def delete_many(self, keys: Sequence[str]) -> None:
        unique = list(dict.fromkeys(self._prefix + key for key in keys))
        for start in range(0, len(unique), _CHUNK):
            result = self._collection.remove_multi(unique[start : start + _CHUNK])
            _raise_first(result.exceptions, "remove")

    def purge_expired(self) -> int:
        """Couchbase removes expired documents itself (expiry pager and compaction)."""
        return 0

    def ping(self) -> None:
        with suppress(DocumentNotFoundException):  # not found still means the bucket answered
            self._collection.get(self._prefix + _PING_KEY, transcoder=_TRANSCODER)

    def close(self) -> None:
        self._cluster.close()
