"""The ports Blackbox's domain talks to. Every adapter (embedded SQLite, Kafka/MySQL/Couchbase,
AWS) implements these and passes the same contract suite under tests/contract/.

This package is the leaf of the layers (docs/architecture.md): it and its modules (errors, limits,
times, telemetry) import nothing else of Blackbox, so every other package may import them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple, Protocol

from ports.releases import NO_RELEASES, ReleaseCounts, ReleaseIncrements

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class OutgoingRecord:
    value: bytes
    key: bytes | None = None
    headers: Headers = ()


@dataclass(frozen=True)
class LogRecord:
    topic: str
    partition: int
    offset: int
    value: bytes
    key: bytes | None
    headers: Headers
    timestamp_ms: int


class LogConsumer(Protocol):
    """A consumer-group member. Records come in offset order per partition; nothing is committed
    unless `commit` is called, and `rewind` makes every uncommitted record come again. A commit may
    be the group's only some time after it returns (Kafka's is not waited for), by `close` at the
    latest; one lost makes records come again, never skips one."""

    def poll(self, max_records: int, max_bytes: int, timeout_s: float) -> list[LogRecord]: ...

    def commit(self, records: Sequence[LogRecord]) -> None: ...

    def rewind(self) -> None: ...

    def close(self) -> bool:
        """Leaves the group; whether every commit asked for was the group's by then (a stop says
        when one was not: its records come again)."""
        ...


# how long a publish may wait for the log before it fails, and capture spills instead (docs/architecture.md)
PUBLISH_TIMEOUT_S = 2.0


class PartlyPublished(Exception):
    """A publish of which the log confirmed some records: those at `unconfirmed` (indexes into the
    records given) are not promised, the others are durable and must not be sent again."""

    def __init__(self, message: str, unconfirmed: Sequence[int]) -> None:
        super().__init__(message)
        self.unconfirmed = tuple(unconfirmed)


class EventLog(Protocol):
    def publish(self, topic: str, records: Sequence[OutgoingRecord]) -> None:
        """Returns only once every record is durable; raises on failure within about
        PUBLISH_TIMEOUT_S: PartlyPublished when some records are durable, ValueRefused when none is
        and the records' own bytes are why (a record past the topic's size), else nothing is promised."""
        ...

    def consumer(self, group: str, topic: str) -> LogConsumer: ...

    def read(self, topic: str, partition: int, offset: int) -> LogRecord | None:
        """The record at this offset, or None when the log holds none there (purged, or beyond
        its end)."""
        ...

    def purge(self, topics: Sequence[str], before_ms: int, readers: Mapping[str, str] | None = None) -> int:
        """Drops the records of these topics published before `before_ms`, but none a topic's
        reader (`readers`: topic → consumer group) has not committed: on a partition it never
        committed, none. Offsets keep growing. Returns how many went."""
        ...

    def end_offsets(self, topic: str) -> dict[int, int]:
        """Each partition's next offset: every record published before the call is below it.
        Partitions that never held a record may be absent."""
        ...

    def start_offsets(self, topic: str) -> dict[int, int]:
        """Each partition's first offset the log still holds (what purge and retention left);
        partitions that never held a record may be absent."""
        ...

    def committed(self, group: str, topic: str) -> dict[int, int]:
        """Each partition's next offset as the group last committed it; partitions it never
        committed are absent."""
        ...

    def ping(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class SpilledRecord:
    spill_id: str
    topic: str
    record: OutgoingRecord


class SpillStore(Protocol):
    """Where capture puts an event the log would not take in time, until `blackbox replay`."""

    def put(self, topic: str, record: OutgoingRecord) -> None:
        """Returns only once the record is durable."""
        ...

    def list(self, limit: int) -> list[SpilledRecord]:
        """The oldest spilled records first."""
        ...

    def delete(self, spill_id: str) -> None: ...

    def set_aside(self, spill_id: str) -> bool:
        """Keeps a record the log refuses out of `list`, for an operator, until `purge` drops it;
        False if it was not there (another replay set it aside, or replayed it, meanwhile)."""
        ...

    def purge(self, before_ms: int) -> int:
        """Drops the records spilled before `before_ms`, those set aside too; returns how many."""
        ...


class DocumentStore(Protocol):
    def upsert_many(self, documents: Mapping[str, bytes], ttl_seconds: int) -> None: ...

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """Missing or expired keys are absent from the answer."""
        ...

    def purge_expired(self) -> int:
        """Frees the space of expired documents (where the engine does not do it by itself)."""
        ...

    def delete_many(self, keys: Sequence[str]) -> None:
        """Missing keys are no error."""
        ...

    def ping(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class IndexEntry:
    report_key: str
    event_id: str
    sku: str
    received_at: int
    size_bytes: int
    crash_type: str | None = None
    error_code: str | None = None
    platform: str | None = None
    build_version: str | None = None
    signature: str | None = None
    attachments: tuple[str, ...] = ()
    processing: ProcessingState | None = None
    """Of a report with a minidump: where its walk stands (None: nothing to walk)."""
    player_id: str | None = None
    """The report's playerId: its group's players affected count it (crashes.issues)."""


ProcessingState = Literal["pending", "processed", "failed"]
# the crash_type of a native upload until its walk names the crash
UNNAMED_CRASH_TYPE = "minidump"


@dataclass(frozen=True)
class Processed:
    """What walking a report's minidump gave its index row: a state, the signature of the crashing
    thread and the crash reason (its crash_type when the report named none, or UNNAMED_CRASH_TYPE), and the
    symbol files it lacked (paths in the symbol-server layout), whose arrival walks it again."""

    report_key: str
    state: ProcessingState
    signature: str | None = None
    crash_type: str | None = None
    missing_symbols: tuple[str, ...] = ()
    at: int = 0


@dataclass(frozen=True)
class ReportOrigin:
    """Of an indexed report, what its walk needs: the sku whose grouping groups it, its build and
    receipt, which its group's issue is moved by, and the signature it had (None: no group yet)."""

    sku: str
    build: str | None
    received_at: int
    signature: str | None = None


@dataclass(frozen=True)
class IndexedReport:
    report_id: int
    submit_time: int
    entry: IndexEntry


@dataclass(frozen=True)
class ReportFilter:
    sku: str
    limit: int
    from_ms: int | None = None
    to_ms: int | None = None
    after_id: int | None = None
    """Only the reports after this one in the listing's order (a keyset cursor)."""
    offset: int = 0
    equals: Mapping[str, str] = field(default_factory=dict)
    """Exact-match filters by IndexEntry field name (crash_type, error_code, platform, ...)."""
    newest_first: bool = False



@dataclass(frozen=True)
class SkuSeen:
    """A sku that has data in a store, and the last time it had some (epoch ms)."""

    sku: str
    last_seen: int


@dataclass(frozen=True)
class CrashGroup:
    signature: str
    count: int
    first_seen: int
    last_seen: int
    sample_report_id: int


class CrashIndex(Protocol):
    def insert_many(self, entries: Sequence[IndexEntry],
                    body_hashes: Mapping[str, str | None] | None = None) -> list[IndexEntry]:
        """One multi-row write; an entry whose report_key is already indexed is left as it is (of a
        key twice in `entries`, the first is written). Returns the entries written, in order.
        `body_hashes` (report key → hash of the submitted text, for reports sent with an
        Idempotency-Key) is kept with each new entry, so that a reused key with another body is
        told from a retry (rule 9 of docs/architecture.md)."""
        ...

    def body_hashes(self, report_keys: Sequence[str]) -> dict[str, str | None]:
        """Those of these report keys already indexed, with the body hash each was indexed with."""
        ...

    def origins(self, report_keys: Sequence[str]) -> dict[str, ReportOrigin]:
        """Those of these report keys indexed, with the sku, build, receipt and signature of each."""
        ...

    def find(self, query: ReportFilter) -> list[IndexedReport]:
        """Reports by report_id, ascending or (newest_first) descending, submit_time in
        [from_ms, to_ms), read in that order from an index whatever the sku's size."""
        ...

    def get(self, report_id: int) -> IndexedReport | None: ...

    def processed(self, results: Sequence[Processed]) -> None:
        """Sets each indexed report's processing state and signature (and its crash_type, where it
        had none), and replaces the symbol files it awaits; a report no longer indexed (purged) is
        passed over. Idempotent: the same results again change nothing."""
        ...

    def regroup(self, signatures: Mapping[int, str | None]) -> None:
        """Sets these reports' signatures (by report id), and nothing else of them: a reprocessing
        under a sku's grouping (crashes.grouping). Idempotent; a report purged since is passed over."""
        ...

    def awaiting_symbols(self, path: str, after_key: str, limit: int) -> list[str]:
        """The report keys, ascending after `after_key`, whose last walk lacked this symbol file."""
        ...

    def crash_groups(
        self, sku: str, from_ms: int, to_ms: int, limit: int, equals: Mapping[str, str] | None = None
    ) -> list[CrashGroup]:
        """Reports with a signature, received in [from_ms, to_ms), matching `equals` (as in
        ReportFilter), grouped by signature, largest first (ties by signature); the sample is the
        group's first report."""
        ...

    def skus(self, after: str, limit: int) -> list[SkuSeen]:
        """The skus with reports, by name, after `after`, each with its last received_at; one
        index lookup a sku, whatever its number of reports."""
        ...

    def crash_counts(self, sku: str, from_ms: int, to_ms: int, bucket_ms: int,
                     equals: Mapping[str, str] | None = None) -> dict[int, int]:
        """Crashes per bucket start, by received_at in [from_ms, to_ms); with `equals`, only the
        reports whose fields match exactly (IndexEntry field → value), as in find."""
        ...

    def purge(self, before_ms: int) -> int:
        """Drops the reports that became readable (submit_time) before `before_ms`, and what they
        awaited of symbols recorded before it; returns how many reports."""
        ...

    def ping(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class SessionBucket:
    sku: str
    minute: int
    kind: str


class OffsetConflict(Exception):
    """Another writer applied this partition since we read its offset."""


@dataclass(frozen=True)
class Checkpoint:
    """What a consumer's write also records, in the same transaction (rule 4 of docs/architecture.md): the partition's
    new offset, if the stored one is still `expected_offset`, and the eventIds applied with the hash
    of what each carried, so a client retry (same Idempotency-Key, so same eventId) at another
    offset is skipped too, and a reused key with another body is told apart (rule 9 of docs/architecture.md)."""

    consumer: str
    topic_partition: str
    expected_offset: int
    new_offset: int
    events: Mapping[str, str | None] = field(default_factory=dict)
    fingerprint: str | None = None
    """Of the record at `new_offset`: a stored offset can then be checked against the log it is
    said to be an offset of (pipeline.offsets)."""
    first_offset: int | None = None
    """Of the first record the transaction applied or passed over (None: `new_offset` alone). The
    offsets first_offset..new_offset are stored as covered, for a replayed failed batch, whose
    records the offset alone cannot tell apart once later batches moved it on (pipeline.offsets)."""


class Applied(NamedTuple):
    """A partition's last applied offset (-1 before the first) and the fingerprint of its record."""

    offset: int
    fingerprint: str | None


class Checkpoints(Protocol):
    def applied(self, consumer: str, topic_partition: str) -> Applied:
        """The last offset applied for this partition (-1 before the first) and its fingerprint."""
        ...

    def seen_events(self, consumer: str, event_ids: Sequence[str]) -> dict[str, str | None]:
        """Those of these eventIds already applied by this consumer, with the body hash of each."""
        ...

    def covered(self, consumer: str, topic_partition: str, offsets: Sequence[int]) -> set[int]:
        """Those of these offsets of the partition that a checkpoint of this consumer covered."""
        ...


class SessionCounters(Checkpoints, ReleaseCounts, Protocol):
    def apply(self, checkpoint: Checkpoint, increments: Mapping[SessionBucket, int],
              releases: ReleaseIncrements = NO_RELEASES) -> None:
        """Adds the increments (and the release counts: sessions, builds seen, players) and records
        the checkpoint in one transaction, only if the stored offset is still the expected one;
        otherwise raises OffsetConflict and changes nothing."""
        ...

    def session_counts(self, sku: str, from_ms: int, to_ms: int, bucket_ms: int) -> dict[int, int]: ...

    def skus(self, after: str, limit: int) -> list[SkuSeen]:
        """The skus with session counts, by name, after `after`, each with the start of its last
        minute with a session; one index lookup a sku."""
        ...

    def purge(self, before_ms: int) -> int:
        """Drops the counts of minutes before `before_ms` (release counts too: players of days
        that ended by it, builds last seen before it), and the applied eventIds and covered offsets recorded
        before it (every consumer's: they share the tables). Returns how many rows
        went."""
        ...

    def close(self) -> None: ...


Order = Literal["desc", "asc"]
Operator = Literal["best", "set", "incr", "decr"]
# how players with the same score rank: sharing a rank, or each its own, by who got there first or
# by a second score (ranking.ties)
Ties = Literal["shared", "earliest", "subscore"]


@dataclass(frozen=True)
class NodeRange:
    """Nodes (level, first..last) inclusive, of a board's ranking tree (ranking.tree)."""

    level: int
    first: int
    last: int


class NodeReader(Protocol):
    def sum_counts(self, board: str, each: Sequence[Sequence[NodeRange]]) -> list[int]:
        """For each list of ranges, the players its nodes count together (many lists a round trip)."""
        ...

    def node_counts(self, board: str, nodes: NodeRange) -> dict[int, int]:
        """prefix → count for the non-empty nodes in the range."""
        ...


# the reset schedule of a board whose one season lasts for ever
NEVER_RESETS = "never"
# the epochs (wipes, changes of schedule) a board remembers: it forgets one only once it is old enough
# (ranking.seasons.REMEMBERED_MS), so a board takes this many in that time at most
MAX_EPOCHS = 128


@dataclass(frozen=True)
class BoardSettings:
    board: str
    order: Order = "desc"
    operator: Operator = "best"
    reset: str = NEVER_RESETS
    """When a new season starts (ranking.seasons): never, or a cron expression in UTC."""
    epochs: tuple[tuple[int, str], ...] = ()
    """When a season started outside the schedule (a wipe, a change of schedule) and the schedule
    from then on, ascending, the first from 0 (ranking.seasons); none: `reset` since the start."""
    ties: Ties = "shared"
    keep_seasons: int | None = None
    """How many past seasons retention keeps (the current one is always kept); None: all."""
    starts_at: int | None = None
    """From when the board takes scores (epoch ms, by when they were received); None: always."""
    ends_at: int | None = None
    """Until when (excluded); None: for ever."""
    max_attempts: int | None = None
    """A tournament's attempts a player and season (ranking.tournaments); None: unlimited."""
    max_players: int | None = None
    """A tournament's players a season; None: unlimited."""

    @property
    def tournament(self) -> bool:
        """Its scores come only through attempts (ranking.tournaments)."""
        return self.max_attempts is not None or self.max_players is not None

    def takes(self, received_at: int) -> bool:
        """Whether a score received then is within the board's window."""
        return ((self.starts_at is None or self.starts_at <= received_at)
                and (self.ends_at is None or received_at < self.ends_at))


@dataclass(frozen=True)
class BoardUpdate:
    """One board season's share of a ranking batch: new scores, the players it removes, and the
    node count changes they make, stored under `key` (ranking.seasons.season_key); `season` is the
    season's start (None: a board that never resets)."""

    settings: BoardSettings
    scores: Mapping[str, int]
    deltas: Mapping[tuple[int, int], int]
    key: str = ""
    season: int | None = None
    removed: Sequence[str] = ()
    metadata: Mapping[str, str | None] = field(default_factory=dict)
    """Player → the metadata its record now has (None: none), for the records whose metadata changed."""
    tiebreaks: Mapping[str, int] = field(default_factory=dict)
    """Player → the tiebreak of its new score (ranking.ties), where it is not 0."""
    tie_deltas: Mapping[tuple[int, int, int], int] = field(default_factory=dict)
    """(score, level, prefix) → count change of the tie trees (ranking.ties), added after `cleared`."""
    cleared: Sequence[int] = ()
    """The scores whose tie tree goes: one player or none is left at them."""
    hidden: frozenset[str] = frozenset()
    """The players of `scores` whose records are written hidden: banned (ranking.bans)."""
    scored: bool = False
    """Its batch brought a score to this season, whatever it made of it (a score and its deletion in one
    batch write nothing): the season holds scores, as it would had they come in two batches."""

    @property
    def stored_as(self) -> str:
        return self.key or self.settings.board

    @property
    def lists(self) -> bool:
        """Whether its season is listed: it came with a score or writes a row (a ban's recheck or a
        deletion of no record may bring neither)."""
        return self.scored or bool(self.scores or self.deltas or self.removed or self.metadata or self.tie_deltas
                                   or self.cleared)


@dataclass(frozen=True)
class Entry:
    player_id: str
    score: int
    metadata: str | None = None
    """The JSON object the record's update carried, as text."""
    tiebreak: int = 0
    """What ranks it among players of the same score (ranking.ties): the greater the better on a
    desc board, the smaller on an asc one; 0 on a board whose ties share a rank."""
    hidden: bool = False
    """Its player is banned: out of every rank and list, kept as the updates make it."""

    @property
    def position(self) -> Position:
        return Position(self.score, self.tiebreak, self.player_id)


class Position(NamedTuple):
    """A place in a board's order: by score, then tiebreak (both the way the board sorts), then
    playerId ascending."""

    score: int
    tiebreak: int
    player_id: str


AttemptOutcome = Literal["recorded", "retried", "conflict", "closed", "exhausted", "full"]


@dataclass(frozen=True)
class Attempt:
    """An attempt at a tournament board's season (ranking.tournaments), as the store decides it."""

    key: str
    """The season it counts in (ranking.seasons.season_key)."""
    player_id: str
    event_id: str
    body_hash: str | None
    """None: an event without an Idempotency-Key, which no retry can name, so it is not kept."""
    received_at: int
    open: bool
    """Whether the board takes scores now (its window)."""
    max_attempts: int | None
    max_players: int | None


@dataclass(frozen=True)
class Attempted:
    outcome: AttemptOutcome
    key: str = ""
    """The season the attempt counts in: for a retry, the first one's."""
    attempt: int = 0
    """Its number among the player's attempts of that season (recorded or retried)."""
    received_at: int = 0
    """When it was first received (recorded or retried)."""


class TournamentStore(Protocol):
    """Attempts at tournament boards: each season's players and their attempts, counted under a
    lock, so that no limit is passed by requests that race."""

    def attempt(self, attempt: Attempt) -> Attempted:
        """In one transaction that holds the season's lock: a kept event id with the same body
        hash → `retried`, with another → `conflict`; else not open → `closed`; a player with
        `max_attempts` attempts → `exhausted`; a new player once the season has `max_players` →
        `full`; else the attempt is counted (and its event kept) → `recorded`."""
        ...

    def attempts(self, key: str, player_ids: Sequence[str]) -> dict[str, int]:
        """These players' attempts in the season (those with none left out)."""
        ...

    def entrants(self, key: str) -> int:
        """The season's players (with at least one attempt)."""
        ...


class RankingStore(NodeReader, Checkpoints, TournamentStore, Protocol):
    def snapshot(self) -> AbstractContextManager[None]:
        """Reads of this thread within it see one state of the store: a list's entries and their
        ranks are read apart, while the worker writes."""
        ...

    def get_board(self, board: str) -> BoardSettings | None: ...

    def boards_named(self, boards: Sequence[str]) -> dict[str, BoardSettings]:
        """The settings of those of these boards that exist, by name."""
        ...

    def put_board(self, settings: BoardSettings) -> None: ...

    def add_board(self, settings: BoardSettings) -> bool:
        """Makes the board only if it is missing; True when it did."""
        ...

    def replace_board(self, known: BoardSettings, settings: BoardSettings) -> bool:
        """Writes the board's settings only if they are still `known` (as read before); True when
        they were (a change made meanwhile is never undone: the caller reads again)."""
        ...

    def boards(self, after: str, limit: int) -> list[BoardSettings]:
        """The boards by name, after `after`."""
        ...

    def scores(self, board: str, player_ids: Sequence[str]) -> dict[str, int]: ...

    def records(self, board: str, player_ids: Sequence[str]) -> dict[str, Entry]:
        """These players' records, with their metadata, hidden ones included (Entry.hidden)."""
        ...

    def apply(self, checkpoint: Checkpoint, updates: Sequence[BoardUpdate]) -> None:
        """Creates missing boards (and records their seasons), writes scores, removes players and
        adds node deltas, and records the checkpoint, all in one transaction, only if the stored
        offset is still the expected one (else OffsetConflict), and the players it writes hidden are
        banned still (else BansLifted, ports.errors)."""
        ...

    def seasons(self, board: str, before: int | None, limit: int) -> list[int]:
        """The starts of the board's seasons that hold scores, newest first, before `before`."""
        ...

    def following(self, board: str, order: Order, position: Position, *, worse: bool, limit: int,
                  skip: int = 0) -> list[Entry]:
        """The players strictly worse (or better) than `position` in the board's order, nearest
        first, the first `skip` of them left out (hidden records too, as in every read below)."""
        ...

    def ban(self, player_id: str, banned_at: int) -> bool:
        """Puts the player on the ban list (at once, for every board); True when it was not on it."""
        ...

    def unban(self, player_id: str) -> bool:
        """Takes the player off the ban list; True when it was on it."""
        ...

    def banned(self, player_ids: Sequence[str]) -> dict[str, int]:
        """Those of these players on the ban list, with when they were banned."""
        ...

    def bans(self, after: str, limit: int) -> list[tuple[str, int]]:
        """The ban list by playerId after `after`: each player and when it was banned."""
        ...

    def drop_season(self, board: str, start: int) -> int:
        """Deletes the board's season that started at `start`: its records, tree, attempts and
        listing (retention, ranking.seasons.purge_seasons); how many rows went."""
        ...

    def keys_of(self, player_id: str) -> list[str]:
        """Where the player has records, hidden or not: its boards' seasons."""
        ...

    def leaves(self, board: str, scores: Sequence[int]) -> dict[int, int]:
        """How many players have each of these scores (those with none left out)."""
        ...

    def at_scores(self, board: str, scores: Sequence[int]) -> list[Entry]:
        """The players with exactly these scores (the worker asks where one player is alone)."""
        ...

    def tie_nodes_at(self, board: str, scores: Sequence[int],
                     levels: Sequence[int]) -> dict[tuple[int, int], tuple[int, int]]:
        """(score, level) → (prefix, count) of the node of the score's tie tree at each of `levels`
        with a count, for these scores (at most one a score and level: ranking.ties keeps its roots
        and floors there)."""
        ...

    def tie_counts(self, board: str, nodes: Sequence[tuple[int, int, int]]) -> dict[tuple[int, int, int], int]:
        """The counts of these (score, level, prefix) nodes of the scores' tie trees (ranking.ties),
        those with none left out: a seek each, many a round trip."""
        ...

    def tie_sums(self, board: str, each: Sequence[tuple[int, Sequence[NodeRange]]]) -> list[int]:
        """For each (score, ranges), the players counted by those nodes of the score's tie tree
        (ranking.ties); many a round trip."""
        ...

    def tied_before(self, board: str, positions: Sequence[Position]) -> list[int]:
        """For each position, how many players have exactly its score and tiebreak and a smaller
        playerId; many a round trip."""
        ...

    def better_tied(self, board: str, order: Order, keys: Sequence[tuple[int, int, int]], at_most: int) -> list[int]:
        """For each (score, tiebreak, bound), how many players shown have that score and a tiebreak
        better than `tiebreak` (as the board sorts) and no better than `bound`, counted to `at_most`:
        at most that many index entries read an item; many a round trip."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Project:
    """What a native crash reporter names in its upload URL (a Sentry DSN's last part): a number
    that stands for one sku."""

    project_id: int
    sku: str
    updated_at: int


class ProjectStore(Protocol):
    def put(self, project: Project) -> bool:
        """Creates the project or points it at another sku; True when it is new."""
        ...

    def get(self, project_id: int) -> Project | None: ...

    def projects(self, after: int, limit: int) -> list[Project]:
        """The projects by id, after `after`."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class SymbolFile:
    path: str
    """In the symbol-server layout: `<debug file>/<debug id>/<debug file, less .pdb>.sym`."""
    size_bytes: int
    uploaded_at: int


class SymbolStore(Protocol):
    """Breakpad symbol files by their symbol-server path, and a copy on this machine for the stack
    walker, which reads a directory."""

    def put(self, path: str, data: bytes, uploaded_at: int) -> bool:
        """Stores the file whole (a reader sees the old one or the new one); True when it is new."""
        ...

    def files(self, after: str, limit: int) -> list[SymbolFile]:
        """The files by path, after `after`."""
        ...

    def delete(self, path: str) -> bool:
        """True when there was a file to delete."""
        ...

    def local(self, paths: Sequence[str]) -> tuple[Path, bool]:
        """A directory on this machine in the symbol-server layout in which those of `paths` that
        the store holds are as they are in the store now, and the others absent; and whether making
        it so changed any of them (a walk made before then is worth making again)."""
        ...
