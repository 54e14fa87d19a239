"""The ledger writer: one thread per process that owns the team aggregates and group-commits.

A per-request get → command → save would serialise every request on a database round trip and
collapse under contention (docs/billing.md, "The writer"). Instead, handlers queue
commands here; the writer thread takes everything queued (up to ``max_batch``), applies each command
to the in-memory aggregate in order — so each caller gets the state right after *its own* event —
and appends all the resulting events of all teams in ONE transaction. Callers' futures complete only
after that commit, so nothing a client is told is ever ahead of what is durable.

Other processes (the CLI, other gateways) may append to the same teams. Optimistic concurrency on the
event store catches that: a conflicting save is discarded, the touched teams catch up, and the
whole batch is applied again (commands are idempotent per request id), a bounded number of times.
A refusal for lack of credits is re-checked against the stored history first, so credits added
from elsewhere are seen at once.

Only a version conflict is retried as one (``app/store/store_errors.py`` tells the store's
refusals apart). A duplicate of a once-only row — a second charge of a request, a second answer
under an Idempotency-Key — or a value the database rejects is the fault of one command, and that
command alone fails: the batch is committed again one command at a time. One bad command must
never cost other teams their requests.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any, Generic, TypeAlias, TypeVar
from uuid import UUID

from mypy_extensions import mypyc_attr

from app.ledger.durable import durable
from app.ledger.refusals import ServiceRefusal
from app.ledger.results import Charged
from app.ledger.team_cache import Loaded, TeamCache
from app.ledger.turns import Turns
from app.observability import metrics, timeline
from app.store.event_store import LedgerStore
from app.store.log_append import LoggedLeaf
from app.store.read_models import IdempotentResponse
from app.store.snapshots import SNAPSHOT_EVERY
from app.store.store_errors import DuplicateRecord, RecordRejected, StaleConnection, StoreRefused, VersionConflict
from app.store.writer_lock import WriterLock
from domain.ledger import AlreadyCharged, InsufficientCredits, LedgerError, TeamLedger, TeamNotFound, TeamSuspended

log = logging.getLogger("tollgate.ledger")

R = TypeVar("R")


@mypyc_attr(native_class=False)  # compiled, a generic dataclass fails to be made at import
@dataclass(frozen=True, slots=True)
class Recorded(Generic[R]):
    """What a command decided: its caller's result (``value``), and the read-model rows to write in
    the same transaction as its events (``idempotent``: answers stored under an Idempotency-Key, so
    that no retry can ever find the charge without its answer)."""

    value: R
    idempotent: tuple[IdempotentResponse, ...] = ()


#: A command gets the team's aggregate (``None`` if the team does not exist yet) and returns the
#: aggregate to keep (a new one when it opens the team) and what it decided.
# Quoted: compiled, ``Recorded`` is a plain class at run time, not subscriptable.
Command: TypeAlias = "Callable[[TeamLedger | None], tuple[TeamLedger, Recorded[R]]]"


class LedgerUnavailable(ServiceRefusal):
    """The event store could not be written; nothing in the batch was recorded."""

    @property
    def told(self) -> str:
        return f"The billing ledger is unavailable: {self}"


class RefusedByStore(LedgerError):
    """The store refused this command's writes (``constraint``: the unique key it broke, if any);
    nothing of it was recorded, and the commands batched with it were committed without it."""

    def __init__(self, reason: str, constraint: str | None = None) -> None:
        super().__init__(f"the ledger refused this command: {reason}")
        self.constraint = constraint


@mypyc_attr(native_class=False)
@dataclass(slots=True)
class _Queued(Generic[R]):
    team_id: UUID
    command: Command[R]
    future: Future[R] = field(default_factory=Future)


@dataclass(frozen=True, slots=True)
class _Between:
    """Something to do on the writer thread between two batches."""

    action: Callable[[], None]


#: One outcome of a decided batch: the command, and its result or the refusal it raised.
_Outcome: TypeAlias = tuple["_Queued[Any]", object, LedgerError | None]


#: Commands decided and committed in one transaction at most.
MAX_BATCH = 64
#: Times a batch is decided again after losing a version race, before its callers are told to retry.
MAX_ATTEMPTS = 20


def _random_backoff(attempt: int) -> None:
    """A random wait that doubles with each lost race (up to 128 ms at most), so racing writers spread out."""
    time.sleep(random.uniform(0, 0.002 * 2 ** min(attempt, 6)))


@dataclass(frozen=True, slots=True)
class Scheduling:
    """How a writer waits and loads teams: a gateway's (threads that load, a random sleep after a lost
    race), or the deterministic simulator's (``loaders=0``: loaded on the one thread; a backoff that
    only advances simulated time)."""

    #: Waits before the ``n``-th attempt after a lost version race.
    backoff: Callable[[int], None] = _random_backoff
    #: Threads loading teams (0: loaded on the writer's own thread when first needed).
    loaders: int = 2


class LedgerWriter:
    """Owns the in-memory team aggregates of this process and writes them in group commits."""

    def __init__(
        self,
        store: LedgerStore,
        *,
        on_commit: Callable[[], None] | None = None,
        lock: WriterLock | None = None,
        snapshot_every: int | None = SNAPSHOT_EVERY,
        scheduling: Scheduling | None = None,
    ) -> None:
        """``lock``: taken around each batch when other gateway processes write the same ledger
        (app/store/writer_lock.py); the batch's teams first catch up with what they wrote.
        ``snapshot_every``: a snapshot of a team every this many of its events (None: none).
        ``scheduling``: how it waits and loads (a gateway's threads by default; the simulator's one thread)."""
        scheduling = scheduling or Scheduling()
        self.store = store
        self._on_commit = on_commit
        self.max_batch = MAX_BATCH
        self.max_attempts = MAX_ATTEMPTS
        #: Commands to decide, loaded teams (``app/ledger/team_cache.py``); ``None`` tells the
        #: thread to stop once it has decided what came before.
        self._queue: queue.SimpleQueue[_Queued[Any] | Loaded | _Between | None] = queue.SimpleQueue()
        # With other processes writing the same teams, a copy left idle for long would have much to
        # catch up on the writer thread: dropped after a minute, it is loaded from its snapshot instead.
        self._cache: TeamCache[_Queued[Any]] = TeamCache(
            store,
            self._queue.put,
            snapshot_every=snapshot_every,
            idle_seconds=60 if lock is not None else 600,
            loaders=scheduling.loaders,
        )
        self._backoff = scheduling.backoff
        #: Answers stored under an Idempotency-Key by the commands of the batch being decided.
        self._pending_answers: dict[tuple[UUID, str], IdempotentResponse] = {}
        #: With the lock: the turns (``app/ledger/turns.py``), and the commands of teams another process
        #: was writing, held back (in order) for the next batch.
        self._turns = Turns(lock, store, self._copies, self._catch_up, self._commit) if lock is not None else None
        self._deferred: list[_Queued[Any]] = []
        # Not ``_thread``: compiled, an attribute is a C struct field of its name with ``_`` before it,
        # and ``__thread`` is a keyword of GCC's.
        self._worker: threading.Thread | None = None
        self._driven = False  # decided by ``drain`` on the caller's thread (the simulator), not a thread
        #: Told (on the writer thread) why a batch could not be saved: ``app/ledger/health.py``.
        self.on_failure: Callable[[str], None] | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> LedgerWriter:
        if self._worker is None:
            self._worker = threading.Thread(target=self._run, name="tollgate-ledger-writer", daemon=True)
            self._worker.start()
        return self

    def driven(self) -> LedgerWriter:
        """Take commands without a thread of its own: the caller decides them with :meth:`drain`."""
        self._driven = True
        return self

    def stop(self) -> None:
        """Finish every queued command, then stop the thread."""
        if self._worker is not None:
            self._queue.put(None)
            self._worker.join()
            self._worker = None
        self._cache.close()
        if self._turns is not None:
            self._turns.close()

    @property
    def running(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    def __enter__(self) -> LedgerWriter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- submitting -----------------------------------------------------------------------------

    def submit(self, team_id: UUID, command: Command[R]) -> Future[R]:
        """Queue a command; the future completes after its events are durable (or it was refused)."""
        if self._worker is None and not self._driven:
            raise RuntimeError("the ledger writer is not running")
        item = _Queued(team_id, command)
        self._queue.put(item)
        return item.future

    def on_team(self, team_id: UUID, name: str, action: Callable[[TeamLedger], R]) -> Future[R]:
        """Queue ``action`` on an existing team (``TeamNotFound`` if there is none)."""
        return self.on_team_recording(team_id, name, lambda team: Recorded(action(team)))

    def on_team_recording(self, team_id: UUID, name: str, action: Callable[[TeamLedger], Recorded[R]]) -> Future[R]:
        """``on_team`` for an action that also writes read-model rows with its events (``Recorded``);
        the future gets the action's ``value``."""

        def command(team: TeamLedger | None) -> tuple[TeamLedger, Recorded[R]]:
            if team is None:
                raise TeamNotFound(name)
            return team, action(team)

        return self.submit(team_id, command)

    async def run_on_team(self, team_id: UUID, name: str, action: Callable[[TeamLedger], R]) -> R:
        """``on_team``, awaited; a caller that is cancelled stops waiting, but the command is applied
        (``app/ledger/durable.py``: the writer never finds a cancelled future in its batch)."""
        return await durable(self.on_team(team_id, name, action))

    # -- the writer thread ----------------------------------------------------------------------

    def warm(self, team_ids: Iterable[UUID]) -> None:
        """Load these teams in the background (at start: the most recently active ones)."""
        teams = list(team_ids)
        self._queue.put(_Between(lambda: self._cache.warm(teams)))

    def _run(self) -> None:
        stopping = False
        while not stopping or self._cache.loading or self._deferred:
            # Commands held back for another process's turn go first, in order (and no waiting for more).
            items: list[_Queued[Any] | Loaded | _Between | None] = [] if self._deferred else [self._queue.get()]
            stopping = self._decide_queued(items) or stopping

    def drain(self) -> bool:
        """Decide and commit every command queued now, on the calling thread, without waiting for
        more (the deterministic simulator's writer, which has no thread of its own); whether any was."""
        decided = False
        while not self._queue.empty() or self._deferred:
            self._decide_queued([])
            decided = True
        return decided

    def _decide_queued(self, items: list[_Queued[Any] | Loaded | _Between | None]) -> bool:
        """Take what is queued (up to a batch, after ``items``) and decide it in batches; whether
        the queue said to stop."""
        stopping = False
        while len(items) < self.max_batch:
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                break
        ready, self._deferred = self._deferred, []
        for item in items:
            if item is None:
                stopping = True
            elif isinstance(item, Loaded):
                ready.extend(self._arrived(item))
            elif isinstance(item, _Between):
                item.action()
            elif self._cache.admit(item.team_id, item):
                ready.append(item)
        for at in range(0, len(ready), self.max_batch):
            with timeline.span("writer.batch", min(self.max_batch, len(ready) - at)):
                self._write(ready[at : at + self.max_batch])
        self._cache.drop_idle()
        return stopping

    def _arrived(self, loaded: Loaded) -> list[_Queued[Any]]:
        """The commands that waited for a team to load, to decide now (or failed, if it could not)."""
        parked = self._cache.arrived(loaded)
        if loaded.error is not None:
            self._failed(str(loaded.error))
            self._fail(parked, LedgerUnavailable(f"the ledger could not be read: {loaded.error}"))
            return []
        return parked

    def _write(self, batch: list[_Queued[Any]]) -> None:
        started = time.perf_counter()
        try:
            if self._turns is None:
                self._commit(batch)
            else:
                self._deferred.extend(self._turns.take(batch, {item.team_id for item in self._deferred}))
        except BaseException as exc:  # never let the writer thread die with callers waiting
            log.exception("ledger writer failed a batch")
            self._failed(str(exc))
            self._fail(batch, LedgerUnavailable(str(exc)))
        metrics.BATCH_SIZE.observe(len(batch))
        metrics.COMMIT_SECONDS.observe(time.perf_counter() - started)

    def _commit(self, batch: list[_Queued[Any]]) -> None:
        """Decide ``batch`` on forks of the committed teams and save it in one transaction; on a
        version conflict catch up and decide again (a bounded number of times). A refusal that
        deciding again cannot cure — a duplicate charge or stored answer, a value the database
        rejects — fails only the command that caused it: the batch is committed again one command
        at a time. Only an unreachable database fails the whole batch."""
        last_conflict = ""
        for attempt in range(self.max_attempts):
            if attempt:  # another writer won the last round: let it finish before trying again
                self._backoff(attempt)
            touched, outcomes, idempotent = self._decide(batch)
            written = {tid: team for tid, team in touched.items() if team is not None}
            # Saving drains the teams' pending events: keep what a refusal of a lone command must name
            # (a refused batch is committed again one command at a time, so only a lone one is named).
            charged = (
                [
                    e.request_id
                    for team in written.values()
                    for e in team.pending_events
                    if isinstance(e, TeamLedger.Charged)
                ]
                if len(batch) == 1
                else []
            )
            try:
                with timeline.span("writer.save", len(written)):
                    logged = self.store.save_teams(written.values(), idempotent)
            except VersionConflict as exc:
                # Another process appended to one of these teams (or opened the same team): bring
                # the committed copies up to date and decide the whole batch again.
                last_conflict = str(exc)
                log.info(
                    "ledger batch of %d command(s) lost a version race (attempt %d of %d: %s); catching up",
                    len(batch),
                    attempt + 1,
                    self.max_attempts,
                    exc,
                )
                self._catch_up(written)
                continue
            except StaleConnection as exc:  # that connection is gone: the same writes on a fresh one
                last_conflict = str(exc)
                log.warning("a ledger connection was in a broken state (%s); it was replaced, writing again", exc)
                continue
            except (DuplicateRecord, RecordRejected) as exc:
                if len(batch) > 1:
                    log.warning(
                        "the ledger refused a batch of %d command(s) (%s); committing them one at a time so "
                        "that only the command at fault fails",
                        len(batch),
                        exc,
                    )
                    for item in batch:
                        self._commit([item])
                    return
                log.warning("the ledger refused a command on team %s: %s", batch[0].team_id, exc)
                _answer(batch[0].future, error=self._refusal(exc, written.get(batch[0].team_id), charged))
                return
            except Exception as exc:  # noqa: BLE001 - StoreUnreachable, or anything unforeseen: nothing was written
                for tid in written:
                    self._cache.forget(tid)
                log.error("ledger write failed: %s", exc)
                self._failed(str(exc))
                self._fail(batch, LedgerUnavailable(f"the ledger could not be written: {exc}"))
                return
            self._committed(written, outcomes, logged)
            return
        log.error(
            "ledger batch of %d command(s) could still not be saved after %d attempts (last: %s)",
            len(batch),
            self.max_attempts,
            last_conflict,
        )
        self._fail(batch, LedgerUnavailable("the ledger kept conflicting with another writer; try again"))

    def _committed(
        self, written: dict[UUID, TeamLedger], outcomes: list[_Outcome], logged: Sequence[LoggedLeaf] = ()
    ) -> None:
        """The batch is durable: keep its teams, and only now tell each caller what it decided (a
        charge with its leaf in the transparency log, for its receipt)."""
        self._cache.committed(written)
        if self._on_commit is not None:
            self._on_commit()
        leaves = {(leaf.originator_id, leaf.version): leaf for leaf in logged}
        for item, value, refusal in outcomes:
            if isinstance(value, Charged) and leaves:
                event = value.event
                value = dataclasses.replace(value, leaf=leaves.get((event.originator_id, event.originator_version)))
            _answer(item.future, value, refusal)

    def _decide(
        self, batch: list[_Queued[Any]]
    ) -> tuple[dict[UUID, TeamLedger | None], list[_Outcome], list[IdempotentResponse]]:
        """Apply the batch's commands in order to forks of the committed teams, so that a refused
        save leaves the committed copies as they were, ready to catch up with what won."""
        touched: dict[UUID, TeamLedger | None] = {}
        outcomes: list[_Outcome] = []
        idempotent: list[IdempotentResponse] = []
        self._pending_answers = {}
        for item in batch:
            if item.team_id in touched:
                team = touched[item.team_id]
            else:
                committed = self._cache.load_now(item.team_id)
                team = committed.fork() if committed is not None else None
            try:
                team, decided = self._apply(item, team)
            except LedgerError as exc:
                outcomes.append((item, None, exc))
                touched[item.team_id] = team
                continue
            touched[item.team_id] = team
            idempotent.extend(decided.idempotent)
            for answer in decided.idempotent:
                self._pending_answers[(answer.team_id, answer.idem_key)] = answer
            outcomes.append((item, decided.value, None))
        return touched, outcomes, idempotent

    def copy_of(self, team_id: UUID) -> TeamLedger | None:
        """This writer's committed copy of the team, if it holds one (read it, never change it: the
        simulator compares it with a replay of the stored events)."""
        return self._cache.teams.get(team_id)

    def answer_pending(self, team_id: UUID, idem_key: str) -> bool:
        """Whether a command decided earlier in the batch being decided stores an answer under this
        key (for commands, which run on the writer thread): not durable yet, but no longer held."""
        return (team_id, idem_key) in self._pending_answers

    @staticmethod
    def _refusal(exc: StoreRefused, team: TeamLedger | None, charged: list[str]) -> LedgerError:
        """What the caller of a refused command is told: a second charge of a request is
        ``AlreadyCharged`` (the first charge stands); any other refusal names the store's reason."""
        if isinstance(exc, DuplicateRecord) and exc.constraint.startswith("charged_requests") and charged:
            return AlreadyCharged(team.name if team is not None else "?", charged[0])
        return RefusedByStore(str(exc), getattr(exc, "constraint", None))

    def _copies(self, team_ids: Iterable[UUID]) -> list[TeamLedger]:
        return [team for tid in team_ids if (team := self._cache.teams.get(tid)) is not None]

    def _catch_up(self, team_ids: Iterable[UUID], found: Sequence[Any] | None = None) -> None:
        """Apply what other processes appended to these teams since our copies — ``found`` (stored
        events read with the lock), or read now in one query for all of them; on any doubt, forget
        the copies (the next command loads them again)."""
        teams = {tid: team for tid in team_ids if (team := self._cache.teams.get(tid)) is not None}
        if not teams:
            return
        try:
            for event in self.store.newer_events_of(teams.values(), found):
                team = teams.get(event.originator_id)
                if team is not None:
                    event.mutate(team)
        except Exception:
            log.exception("could not catch up with teams %s; they will be reloaded", ", ".join(map(str, teams)))
            for tid in teams:
                self._cache.forget(tid)

    def _apply(self, item: _Queued[R], team: TeamLedger | None) -> tuple[TeamLedger, Recorded[R]]:
        try:
            return item.command(team)
        except (InsufficientCredits, TeamSuspended):
            # Credits may have been added, or the team reinstated, by another process since we
            # loaded this team. Re-check against the stored history (only possible while this batch
            # has not touched it yet).
            if team is None or team.pending_events:
                raise
            newer = 0
            for event in self.store.newer_events(team):
                event.mutate(team)
                newer += 1
            if not newer:
                raise
            return item.command(team)

    def _failed(self, reason: str) -> None:
        if self.on_failure is not None:
            self.on_failure(reason)

    @staticmethod
    def _fail(batch: list[_Queued[Any]], exc: Exception) -> None:
        for item in batch:
            _answer(item.future, error=exc)


def _answer(future: Future[Any], value: object = None, error: BaseException | None = None) -> None:
    """Complete a caller's future, unless it was cancelled (its caller stopped waiting, e.g. the
    server cutting a request off at shutdown): the command was applied all the same — a command is
    never skipped, its events are facts — and the caller's own cleanup handles the rest."""
    if future.done():
        return
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
    except InvalidStateError:  # cancelled between the check and the call
        pass
