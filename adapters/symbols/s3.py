"""Symbol files in S3 under a prefix, and a cache of those the stack walker asks for in a local
directory, kept current by conditional gets."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from adapters.symbols.layout import PARTIAL, checked, staged
from ports import SymbolFile

PREFIX = "symbols/"
# object metadata: the uploaded_at the file was put with (x-amz-meta-uploaded-at)
UPLOADED_AT = "uploaded-at"
NOT_MODIFIED, NOT_FOUND, PRECONDITION_FAILED = 304, 404, 412
# S3's most keys per listing page
PAGE = 1_000
# what the cache keeps, in bytes: the walker's /tmp (stacks.functions.WALKER_DISK_MB, 4 GiB) also
# holds the dump a walk writes and a file being fetched. The files a walk asks for stay, past it
# if they must; to make room for one, those least recently asked for go first
CACHE_BYTES = 3 << 30


def _status(error: ClientError) -> int:
    status: int = error.response["ResponseMetadata"]["HTTPStatusCode"]
    return status


class S3SymbolStore:
    def __init__(self, client: Any, bucket: str, cache_dir: Path, prefix: str = PREFIX, *,
                 cache_bytes: int = CACHE_BYTES) -> None:
        self._s3 = client
        self._bucket = bucket
        self._cache = cache_dir
        self._prefix = prefix
        self._cache_bytes = cache_bytes
        cache_dir.mkdir(parents=True, exist_ok=True)
        # the ETag of each cached file's object; a file with none is fetched whole
        self._etags: dict[str, str] = {}
        # the size of each cached file, the least recently asked for first: from the oldest, those
        # a process before this one left (a Lambda runtime restarted keeps its /tmp)
        self._sizes: dict[str, int] = {}
        for path in sorted((p for p in cache_dir.rglob("*") if p.is_file()), key=lambda p: p.stat().st_mtime):
            if path.name.endswith(PARTIAL):  # of a fetch its process died in
                path.unlink(missing_ok=True)
            else:
                self._sizes[path.relative_to(cache_dir).as_posix()] = path.stat().st_size
        self._lock = threading.Lock()

    def _key(self, path: str) -> str:
        return self._prefix + checked(path)

    def put(self, path: str, data: bytes, uploaded_at: int) -> bool:
        # S3 replaces an object atomically; If-None-Match makes exactly one of two puts of a new path
        # the new one, and is refused before the body is sent (botocore expects 100-continue)
        request = {"Bucket": self._bucket, "Key": self._key(path), "Body": data,
                   "Metadata": {UPLOADED_AT: str(uploaded_at)}}
        try:
            self._s3.put_object(**request, IfNoneMatch="*")
            return True
        except ClientError as error:
            if _status(error) != PRECONDITION_FAILED:
                raise
        self._s3.put_object(**request)
        return False

    def files(self, after: str, limit: int) -> list[SymbolFile]:
        # the listing gives the size; uploaded_at, as put, is in the metadata: one HEAD per file
        # returned (LastModified would be S3's clock, to the second, not the time the file was put with)
        files = (self._file(key, size) for key, size in self._listed(after))
        return list(islice((file for file in files if file is not None), max(limit, 0)))

    def _listed(self, after: str) -> Iterator[tuple[str, int]]:
        pages = self._s3.get_paginator("list_objects_v2").paginate(
            Bucket=self._bucket, Prefix=self._prefix, StartAfter=self._prefix + after,
            PaginationConfig={"PageSize": PAGE})
        for page in pages:
            for item in page.get("Contents", []):
                yield item["Key"], item["Size"]

    def _file(self, key: str, size: int) -> SymbolFile | None:
        try:
            head = self._s3.head_object(Bucket=self._bucket, Key=key)
        except ClientError as error:
            if _status(error) == NOT_FOUND:
                return None  # deleted since listed
            raise
        # an object put by other means than put() (the console, a sync) has no such metadata
        uploaded = head["Metadata"].get(UPLOADED_AT)
        at = int(uploaded) if uploaded and uploaded.isdigit() else int(head["LastModified"].timestamp() * 1000)
        return SymbolFile(key.removeprefix(self._prefix), size, at)

    def delete(self, path: str) -> bool:
        key = self._key(path)
        try:
            self._s3.head_object(Bucket=self._bucket, Key=key)
        except ClientError as error:
            if _status(error) == NOT_FOUND:
                return False
            raise
        self._s3.delete_object(Bucket=self._bucket, Key=key)
        return True

    def local(self, paths: Sequence[str]) -> tuple[Path, bool]:
        """The cache directory, with each of `paths` fetched when its object changed since it was
        cached, and removed when the object is gone. An error other than those raises: a file is
        never served on the chance that it is still there."""
        keys = [self._key(path) for path in paths]  # all refused before any is fetched
        changed, asked = False, set(paths)
        with self._lock:  # a file and its ETag change together
            for path, key in zip(paths, keys, strict=True):
                changed |= self._refresh(path, key, asked)
        return self._cache, changed

    def _refresh(self, path: str, key: str, asked: set[str]) -> bool:
        target = self._cache / path
        etag = self._etags.get(path) if target.exists() else None
        try:
            got = self._s3.get_object(Bucket=self._bucket, Key=key, **({"IfNoneMatch": etag} if etag else {}))
        except ClientError as error:
            if _status(error) == NOT_MODIFIED:
                if path in self._sizes:  # the most recently asked for now
                    self._sizes[path] = self._sizes.pop(path)
                return False
            if _status(error) != NOT_FOUND:
                raise
            self._etags.pop(path, None)
            self._sizes.pop(path, None)
            try:
                target.unlink()
            except FileNotFoundError:
                return False
            return True
        # the copy it replaces counts until it is replaced, beside the new one
        self._make_room(got["ContentLength"], asked)
        os.replace(staged(target, got["Body"].iter_chunks()), target)
        self._etags[path] = got["ETag"]
        self._sizes.pop(path, None)
        self._sizes[path] = got["ContentLength"]
        return True

    def _make_room(self, size: int, asked: set[str]) -> None:
        """Drops the files least recently asked for, but those `asked` for now, until `size` more
        bytes fit in the cache's."""
        held = sum(self._sizes.values())
        for path in [path for path in self._sizes if path not in asked]:
            if held + size <= self._cache_bytes:
                return
            (self._cache / path).unlink(missing_ok=True)
            held -= self._sizes.pop(path)
            self._etags.pop(path, None)
