"""Minidump processing: the stage after the crash consumer. Each report with a minidump is walked
by the stack walker (rust-minidump) with the symbol files Blackbox holds; the crashing thread
becomes the report's stack trace and signature, and its crash reason the crashType a native upload
could not name. The walk is kept as a document of its own (`<reportKey>:processed`), and the
index row says where it stands: `pending`, `processed`, or `failed` with the reason.

Requests come on the `minidumps` topic, keyed by report, so one report's walks happen in order.
A walk is a function of the dump and the symbols held, and every write is an upsert by report
key: a request that comes twice writes the same again (effectively once, rule 3 of docs/architecture.md). A report's
walk names the symbol files it lacked; when one arrives (`POST /v1/symbols`), a request names the
file, and the processor asks, a page at a time, for the reports that awaited it to be walked again,
which moves them to the group their symbolicated frames make. The topic also carries the pages of a
reprocessing of a sku's groups (crashes.grouping)."""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator, with_config
from typing_extensions import TypedDict

from crashes.grouping import RegroupRequest, regroup
from crashes.model import attachment_key, is_minidump
from crashes.signature import frames_signature
from crashes.symbols import DEBUG_ID, storable, symbol_path
from pipeline.failures import land
from pipeline.topics import MINIDUMPS, parse_each
from ports import CrashIndex, DocumentStore, EventLog, LogRecord, OutgoingRecord, Processed, SymbolStore
from ports.issues import Crash, Grouping, IssueStore
from ports.limits import cut
from ports.minidumps import WALK_WALL_S, Frame, Module, StackWalker, Walked, WalkFailed, WalkLate
from ports.telemetry import logger
from ports.timeutil import Time, now_ms, to_rfc3339

# reports that awaited a symbol file, asked to be walked again per request of the topic
AWAITING_PAGE = 500
REPORT_KEY = r"^[0-9a-f]{32}$"
# a walk as the API answers it (non-ASCII escaped) is at most this, whatever the dump lists: twice
# that as Lambda carries it at most (ports.limits.carried_bytes), which with its report (1 MiB as
# sent, 3.5 MiB carried at most) stays under the 6 MB API Gateway and Lambda answer
MAX_PROCESSED_BYTES = 1 << 20
# the most of a name a walk keeps: one the dump gives (a module's file, debug file, ids), and one a
# symbol file gives (a function, a source file); a longer one ends in "…"
MAX_NAME_CHARS, MAX_SYMBOL_CHARS = 256, 1024


def processed_key(report_key: str) -> str:
    return f"{report_key}:processed"


def minidump_of(attachments: Mapping[str, bytes]) -> str | None:
    """The first attachment that is a minidump (a report is one crash: the others are not walked)."""
    return next((name for name, data in attachments.items() if is_minidump(data)), None)


class WalkRequest(BaseModel):
    """A record of the minidumps topic: walk one report's minidump (named by its attachment, or,
    walking it again, by its last walk), or find the reports that awaited a symbol file."""

    # a field a later version adds is passed over, not refused, while versions are mixed in a deploy
    model_config = ConfigDict(strict=True, extra="ignore")

    reportKey: Annotated[str, Field(pattern=REPORT_KEY)] | None = None
    attachment: str | None = None
    symbols: str | None = None
    after: str = ""
    last: bool = False
    """Asked because a symbol file the walk lacked arrived during it: not asked again for that."""
    late: int = 0
    """How many walks of it outlasted their deadline before this request (WALK_TRIES)."""

    @model_validator(mode="after")
    def _one_kind(self) -> WalkRequest:
        if (self.reportKey is None) == (self.symbols is None):
            raise ValueError("a request names a reportKey or a symbol file")
        return self


def walk_request(report_key: str, attachment: str | None = None, *, last: bool = False, late: int = 0
                 ) -> OutgoingRecord:
    request = WalkRequest(reportKey=report_key, attachment=attachment, last=last, late=late)
    return OutgoingRecord(request.model_dump_json(exclude_none=True, exclude_defaults=True).encode(),
                          report_key.encode())


def symbols_arrived(path: str, after: str = "") -> OutgoingRecord:
    return OutgoingRecord(WalkRequest(symbols=path, after=after).model_dump_json(exclude_none=True).encode(),
                          path.encode())


@with_config(ConfigDict(extra="forbid"))
class ProcessedFrame(TypedDict):
    module: str | None
    moduleOffset: Annotated[str | None, Field(description="hex, from the module's base")]
    function: str | None
    file: str | None
    line: int | None
    trust: Annotated[str, Field(description="how the walker found it: context, cfi, frame_pointer or scan")]
    missingSymbols: bool


@with_config(ConfigDict(extra="forbid"))
class ProcessedModule(TypedDict):
    name: str
    debugFile: str | None
    debugId: str | None
    codeId: str | None
    missingSymbols: bool


@with_config(ConfigDict(extra="forbid"))
class Omitted(TypedDict):
    """How many of each a walk left out."""

    modules: int
    frames: int
    missingSymbols: int


NOTHING_OMITTED: Omitted = {"modules": 0, "frames": 0, "missingSymbols": 0}


@with_config(ConfigDict(extra="forbid"))
class ProcessedReport(TypedDict):
    """A report's last walk; `reason` says why one failed."""

    state: Literal["processed", "failed"]
    reason: str | None
    attachment: str
    processedAt: Time
    crashReason: Annotated[str | None, Field(description=(
        'e.g. "SIGSEGV / SEGV_MAPERR", "EXCEPTION_ACCESS_VIOLATION_READ"; null for a dump written without a crash'))]
    crashAddress: Annotated[str | None, Field(description="hex")]
    stackTrace: Annotated[str | None, Field(description="the crashing thread, innermost frame first, a line each")]
    signature: str | None
    frames: list[ProcessedFrame]
    modules: list[ProcessedModule]
    missingSymbols: Annotated[list[str], Field(description=(
        "the symbol files (debug file/debug id/name.sym) the crashing thread's frames lacked; uploading one "
        "walks the report again"))]
    omitted: Annotated[Omitted, Field(description=(
        f"what the walk left out to answer within {MAX_PROCESSED_BYTES >> 20} MiB, whatever the dump lists: first "
        "the modules of no frame of the crashing thread, the last listed first; then the outermost frames, each "
        "with its module once no frame kept is in it; then the other modules; then the last missing symbol files. "
        f"A name is cut to {MAX_NAME_CHARS} characters (a function's or a source file's to {MAX_SYMBOL_CHARS:,}), "
        "ending in …"))]


_DOCUMENT = TypeAdapter(ProcessedReport)
# a record of the topic: a walk, or a page of a reprocessing (crashes.grouping)
_REQUEST: TypeAdapter[WalkRequest | RegroupRequest] = TypeAdapter(WalkRequest | RegroupRequest)


def read_processed(raw: bytes) -> ProcessedReport:
    # a walk stored before omissions were counted left nothing out; one stored before times were
    # RFC 3339 holds epoch ms
    stored = {"omitted": NOTHING_OMITTED, **json.loads(raw)}
    if isinstance(at := stored.get("processedAt"), int):
        stored["processedAt"] = to_rfc3339(at)
    return _DOCUMENT.validate_python(stored)


def _hex(value: int | None) -> str | None:
    return None if value is None else hex(value)


def frame_line(frame: Frame) -> str:
    """A stack trace's line: `function (file:line) [module +0xoffset]`, or without symbols
    `module +0xoffset` (Socorro's `module@0x…` is what signature_frame keys it by)."""
    where = f"{frame.module or '?'} +{_hex(frame.module_offset if frame.module else frame.instruction)}"
    if frame.function is None:
        return where
    source = f" ({frame.file}:{frame.line})" if frame.file and frame.line is not None else ""
    return f"{frame.function}{source} [{where}]"


def signature_frame(frame: Frame) -> str:
    """What groups a frame: its function, else where it is in its module (stable across runs of one
    build, where an address is not)."""
    if frame.function is not None:
        return frame.function
    return f"{frame.module}@{_hex(frame.module_offset)}" if frame.module else f"@{_hex(frame.instruction)}"


def walked_frames(walk: ProcessedReport) -> list[str]:
    """A stored walk's frames as its signature takes them (signature_frame), but those found by
    scanning and those of no module (whose address the walk does not keep)."""
    return [f["function"] or f"{f['module']}@{f['moduleOffset']}" for f in walk["frames"]
            if f["trust"] != "scan" and (f["function"] or f["module"])]


def module_symbols(module: Module) -> str | None:
    """Where the module's symbol file is in the symbol-server layout; None for a module that names
    none a store could hold (a dump is the client's: `..` or a NUL may be what it names)."""
    if not module.debug_file or not module.debug_id or not re.fullmatch(DEBUG_ID, module.debug_id):
        return None
    path = symbol_path(module.debug_file, module.debug_id)
    # a file an upload could store: the others are never held, and the longest not even looked for
    if len(path.parts) != 3 or not storable(path.parts[0]):
        return None
    return str(path)


def _processed(report_key: str, attachment: str, walked: Walked | WalkFailed, at: int,
               grouping: Grouping) -> tuple[ProcessedReport, Processed]:
    if isinstance(walked, WalkFailed):
        failed: ProcessedReport = {
            "state": "failed", "reason": walked.reason, "attachment": attachment, "processedAt": to_rfc3339(at),
            "crashReason": None, "crashAddress": None, "stackTrace": None, "signature": None, "frames": [],
            "modules": [], "missingSymbols": [], "omitted": NOTHING_OMITTED}
        return failed, Processed(report_key, "failed", at=at)
    frames = walked.frames
    # frames found by scanning the stack are guesses that differ between runs of one crash
    signature = grouping.group(frames_signature([signature_frame(f) for f in frames if f.trust != "scan"],
                                                grouping.rules))
    missing = sorted({path for m in walked.modules_missing_symbols if (path := module_symbols(m)) is not None})
    shown = [f.model_copy(update={"module": _cut(f.module, MAX_NAME_CHARS), "file": _cut(f.file, MAX_SYMBOL_CHARS),
                                  "function": _cut(f.function, MAX_SYMBOL_CHARS)}) for f in frames]
    entries: list[ProcessedFrame] = [
        {"module": f.module, "moduleOffset": _hex(f.module_offset), "function": f.function, "file": f.file,
         "line": f.line, "trust": f.trust, "missingSymbols": f.missing_symbols} for f in shown]
    modules: list[ProcessedModule] = [
        {"name": cut(m.name, MAX_NAME_CHARS), "debugFile": _cut(m.debug_file, MAX_NAME_CHARS),
         "debugId": _cut(m.debug_id, MAX_NAME_CHARS), "codeId": _cut(m.code_id, MAX_NAME_CHARS),
         "missingSymbols": m.missing_symbols} for m in walked.modules]
    parts: list[list[Any]] = [entries, [frame_line(f) for f in shown], modules, missing]
    kept = _within_bound(parts, _modules_of_frames(walked))
    entries, lines, modules, shown_missing = ([item for item, keep in zip(part, keeps, strict=True) if keep]
                                              for part, keeps in zip(parts, kept, strict=True))
    document: ProcessedReport = {
        "state": "processed", "reason": None, "attachment": attachment, "processedAt": to_rfc3339(at),
        "crashReason": walked.crash_reason, "crashAddress": _hex(walked.crash_address),
        "stackTrace": "\n".join(lines) or None, "signature": signature, "frames": entries, "modules": modules,
        "missingSymbols": shown_missing,
        "omitted": {"modules": kept[2].count(False), "frames": kept[0].count(False),
                    "missingSymbols": kept[3].count(False)},
    }
    return document, Processed(report_key, "processed", signature=signature, crash_type=walked.crash_reason,
                               missing_symbols=tuple(missing), at=at)


def _cut(text: str | None, limit: int) -> str | None:
    return None if text is None else cut(text, limit)


def _answered(value: Any) -> int:
    """Its bytes as the API writes it, with the separator before it in a list."""
    return len(json.dumps(value)) + 2


def _modules_of_frames(walked: Walked) -> list[list[int]]:
    """Each frame's module, as its indexes in walked.modules: as Walked matches them, at its base
    where the walker gave an offset, else by name."""
    at: dict[tuple[str | None, int], list[int]] = {}
    named: dict[str, list[int]] = {}
    for i, module in enumerate(walked.modules):
        at.setdefault((module.name, module.base_address), []).append(i)
        named.setdefault(module.name, []).append(i)
    return [at.get((f.module, f.instruction - f.module_offset), []) if f.module_offset is not None
            else named.get(f.module or "", []) for f in walked.frames]


def _within_bound(parts: list[list[Any]], frame_modules: list[list[int]]) -> list[list[bool]]:
    """Which of a walk's frames, stack trace lines, modules and missing symbol files (`parts`) it keeps
    to answer within MAX_PROCESSED_BYTES: first the modules of no frame go, the last listed first;
    then the outermost frames, each with its line and the module no frame kept is in; then the other
    modules; then the last missing symbol files. `frame_modules`: each frame's modules' indexes."""
    frames, _, modules, missing = parts
    kept = [[True] * len(part) for part in parts]
    # the walk's other fields and the lists' names take far less than this
    over = sum(_answered(item) for part in parts for item in part) + 4096 - MAX_PROCESSED_BYTES
    in_frames = Counter(i for found in frame_modules for i in found)

    def leave(part: int, i: int) -> None:
        nonlocal over
        if kept[part][i]:
            kept[part][i] = False
            over -= _answered(parts[part][i])

    steps = [(2, (i for i in reversed(range(len(modules))) if not in_frames[i])), (0, reversed(range(len(frames)))),
             (2, reversed(range(len(modules)))), (3, reversed(range(len(missing))))]
    for part, order in steps:
        for i in order:
            if over <= 0:
                return kept
            leave(part, i)
            if part == 0:  # a frame goes with its line, and with its module once no frame kept is in it
                leave(1, i)
                for module in frame_modules[i]:
                    in_frames[module] -= 1
                    if not in_frames[module]:
                        leave(2, module)
    return kept


# walks of a dump at most: a store away from this machine brings the files of the modules a walk
# reached, with which the next may reach more (call frame information unwinds past what a scan of
# the stack could not)
WALKS = 3


def walk(walker: StackWalker, symbols: SymbolStore, minidump: bytes) -> Walked | WalkFailed:
    """The walk with every symbol file the store holds for the crashing thread's modules: a store
    away from this machine (S3) is asked for those each walk named, and walked again while that
    brings any, WALKS times at most."""
    root, _ = symbols.local(())
    walked = walker.walk(minidump, root)
    wanted: set[str] = set()
    for _ in range(WALKS - 1):
        if not isinstance(walked, Walked):
            break
        named = wanted | {p for m in walked.frame_modules if (p := module_symbols(m)) is not None}
        if named == wanted:
            break
        wanted = named
        # every file wanted so far, which the cache keeps while it fetches the new ones
        _, changed = symbols.local(sorted(wanted))
        if not changed:
            break
        walked = walker.walk(minidump, root)
    return walked


# the longest a report's walks may take: WALKS, each within its deadline of wall time, and a minute
# for the symbol files fetched between them
REPORT_MOST_S = WALKS * WALK_WALL_S + 60.0
# and what a report is begun with, past the first: its walks and a minute for the batch's writes
# after them (documents, index, issues, the requests asked again)
BEGIN_WITH_S = REPORT_MOST_S + 60.0


def _unbounded() -> float:
    return math.inf


# a report's walk tried this many times, each past its deadline of wall time, is failed: a machine
# that stays that busy would otherwise have it asked for again without end
WALK_TRIES = 5


def _final(requests: Sequence[WalkRequest]) -> set[str | None]:
    """The reports the batch asks for only as `last`: not asked again for a symbol file's race."""
    return {r.reportKey for r in requests if r.last} - {r.reportKey for r in requests if not r.last}


class _NoTimeLeft(Exception):
    """A report not begun for want of the invocation's time: asked for again."""


@dataclass
class _Invocation:
    """What a call of Processor.process did so far, for the halves of a batch a value failed: each
    walk it began (the first whatever the time) and what it gave or the error it raised, so that a
    half neither walks a report again nor needs the time to."""

    walks: dict[tuple[str, str], Walked | WalkFailed | Exception | None] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Processor:
    """The minidump processor's ports."""

    documents: DocumentStore
    index: CrashIndex
    symbols: SymbolStore
    walker: StackWalker
    log: EventLog
    issues: IssueStore
    """the skus' groupings, and the issues of the groups a reprocessing moves reports to"""
    ttl_seconds: int
    time_left_s: Callable[[], float] = _unbounded
    """the invocation's time left (Lambda's context): past the first, a report is begun only with
    BEGIN_WITH_S of it left, and else asked for again, where a timeout would lose the batch's walks"""

    def process(self, records: Sequence[LogRecord]) -> list[Processed]:
        """Walks the batch's requests; returns the reports' new states."""
        # one for the halves of a batch a value failed too: they begin no report without the time for it
        invocation = _Invocation()
        return [result for results in land(records, lambda part: self._process(part, invocation), self.log)
                for result in results]

    def _process(self, records: Sequence[LogRecord], invocation: _Invocation) -> list[Processed]:
        parsed = parse_each(records, _REQUEST.validate_json, "minidump request")
        requests = [r for r in parsed if isinstance(r, WalkRequest)]
        results = self._walk([r for r in requests if r.reportKey is not None], invocation)
        # what the batch asks for, once its walks are done: a walker that cannot run fails the batch
        # first, and each retry would ask again
        for regrouping in parsed:
            if isinstance(regrouping, RegroupRequest):
                self._regroup(regrouping)
        for request in requests:
            if request.symbols is not None:
                self._ask_again(request.symbols, request.after)
        if results:
            self._walk_again_if_raced(requests, results)
        return results

    def _walk(self, requests: Sequence[WalkRequest], invocation: _Invocation) -> list[Processed]:
        walks = self._attachments(requests)
        tried: dict[str | None, int] = defaultdict(int)
        for request in requests:
            tried[request.reportKey] = max(tried[request.reportKey], request.late)
        # a report purged since it was asked for is not walked again (nor its walk kept); the index
        # row names the sku whose grouping groups the walk
        origins = self.index.origins(list(walks)) if walks else {}
        found = self.documents.get_many([attachment_key(key, name) for key, name in walks.items() if key in origins])
        groupings: dict[str, Grouping] = {}
        documents: dict[str, bytes] = {}
        results: list[Processed] = []
        # each report asked for again, with its late walks
        asked: dict[str, int] = {}
        for key, name in walks.items():
            dump = found.get(attachment_key(key, name))
            if dump is None:  # expired or purged with its report: nothing left to walk
                continue
            try:
                walked = self._walked_once(invocation, key, name, dump, tried[key])
            except _NoTimeLeft:
                asked[key] = tried[key]
                continue
            sku = origins[key].sku
            if sku not in groupings:
                groupings[sku] = self.issues.grouping(sku)
            if walked is None:
                asked[key] = tried[key] + 1
                continue
            document, result = _processed(key, name, walked, now_ms(), groupings[sku])
            documents[processed_key(key)] = _DOCUMENT.dump_json(document)
            results.append(result)
        # the document first: a state the index shows has its walk to read; the issues too, as the
        # consumer does: a group the index shows has its issue. A report that had no group (a minidump
        # alone) moves its walk's as the consumer moves a report's (made with a new-group alert,
        # regressed); one its client grouped, or walked before, only makes an issue where none is (as a
        # reprocessing does): its first group raised what it did
        if documents:
            self.documents.upsert_many(documents, self.ttl_seconds)
            first: list[Crash] = []
            again: list[Crash] = []
            for result in results:
                if result.signature is not None:
                    o = origins[result.report_key]
                    (first if o.signature is None else again).append(
                        Crash(o.sku, result.signature, o.build, o.received_at))
            if first:
                self.issues.observe(first, now_ms())
            if again:
                self.issues.regrouped(again)
            self.index.processed(results)
            self.issues.counted(first)
        if asked:  # after the batch's walks are kept: a failure to ask retries the batch, not them alone
            final = _final(requests)
            self.log.publish(MINIDUMPS, [walk_request(key, walks[key], last=key in final, late=late)
                                         for key, late in asked.items()])
        return results

    def _walked_once(self, invocation: _Invocation, key: str, name: str, dump: bytes,
                     late: int) -> Walked | WalkFailed | None:
        """The dump's walk as _walked gives it, or as the invocation made it already (or the error
        that walk raised: this half holds the value that failed the batch). _NoTimeLeft when it is
        not the invocation's first and too little of its time is left to begin it."""
        if (key, name) in invocation.walks:
            walked = invocation.walks[key, name]
            if isinstance(walked, Exception):
                raise walked
            return walked
        if invocation.walks and self.time_left_s() < BEGIN_WITH_S:
            raise _NoTimeLeft
        try:
            walked = self._walked(key, dump, late)
        except Exception as error:
            invocation.walks[key, name] = error
            raise
        invocation.walks[key, name] = walked
        return walked

    def _walked(self, key: str, dump: bytes, late: int) -> Walked | WalkFailed | None:
        """The dump's walk; None where it outlasted its deadline and is to be asked for again (a
        report `late` so many times before)."""
        try:
            return walk(self.walker, self.symbols, dump)
        except WalkLate as busy:
            if late + 1 < WALK_TRIES:
                logger.warning("a walk outlasted its deadline; its report is asked for again",
                               extra={"reportKey": key, "reason": str(busy)})
                return None
            return WalkFailed(f"the walk outlasted its deadline {WALK_TRIES} times (the machine was busy)")

    def _walk_again_if_raced(self, requests: Sequence[WalkRequest], results: Sequence[Processed]) -> None:
        """A symbol file uploaded while a report was walked without it may have had its reports
        asked for before this walk recorded that it awaits the file: the report asks for itself
        once more. (Either its arrival's request read the awaited file, or it was stored before
        this check, which sees it.)"""
        final = _final(requests)
        raced = [r.report_key for r in results if r.missing_symbols and r.report_key not in final
                 and self._held(r.missing_symbols)]
        if raced:
            self.log.publish(MINIDUMPS, [walk_request(key, last=True) for key in raced])

    def _held(self, paths: Sequence[str]) -> bool:
        root, _ = self.symbols.local(paths)
        return any((root / path).is_file() for path in paths)

    def _attachments(self, requests: Sequence[WalkRequest]) -> dict[str, str]:
        """Report key → the attachment to walk: the request's, else the one the last walk read."""
        named = {r.reportKey: r.attachment for r in requests if r.reportKey is not None}
        again = [key for key, name in named.items() if name is None]
        last = self.documents.get_many([processed_key(key) for key in again]) if again else {}
        for key in again:
            raw = last.get(processed_key(key))
            named[key] = None if raw is None else read_processed(raw)["attachment"]
        return {key: name for key, name in named.items() if name is not None}

    def _regroup(self, request: RegroupRequest) -> None:
        """A page of a reprocessing; the reports grouped by their walk are walked again, after it."""
        done = regroup(self.index, self.documents, self.issues, request)
        again = [walk_request(key) for key in done.walk_again]
        if again or done.more is not None:
            self.log.publish(MINIDUMPS, [*again, *([done.more] if done.more is not None else [])])

    def _ask_again(self, path: str, after: str) -> None:
        """Asks for a page of the reports that awaited this symbol file to be walked again, and, if
        the page was full, for the next page."""
        keys = self.index.awaiting_symbols(path, after, AWAITING_PAGE)
        more = [symbols_arrived(path, keys[-1])] if len(keys) == AWAITING_PAGE else []
        if keys:
            self.log.publish(MINIDUMPS, [*(walk_request(key) for key in keys), *more])
