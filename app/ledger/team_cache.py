"""The writer's teams: loaded beside the writer thread, never in its way, and snapshotted beside it too.

The ledger writer decides every command of this process on its in-memory copy of the command's
team. A team it has not seen yet must be loaded first: from its latest snapshot and the events
after it (milliseconds), or, for a team without snapshots, from its whole history (a minute for a
team with a million events). Loading on the writer thread would stall every other team's requests
behind that one load. So the writer only ever decides commands whose team is here; a command for a
team that is not is parked, the team is loaded on a loader thread, and the parked commands go back
to the writer, in the order they came, when it arrives. A request for a team that is still loading
waits only for that team.

Every ``snapshot_every`` events of a team, the writer hands a copy of the committed team to the
snapshot thread, which encodes and stores it (``app/store/snapshots.py``): a snapshot costs the
writer a copy of a small dictionary, never a write.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar
from uuid import UUID

from app.observability import timeline
from app.store.event_store import LedgerStore
from app.store.snapshots import SNAPSHOT_EVERY
from domain.ledger import TeamLedger

log = logging.getLogger("tollgate.ledger")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Loaded:
    """A loader's answer, handed to the writer thread: the team (None: there is none), or why not."""

    team_id: UUID
    team: TeamLedger | None
    snapshot_version: int
    error: Exception | None = None


class TeamCache(Generic[T]):
    """The teams the writer has loaded, and the commands (``T``) parked until theirs arrive.

    Every method but the loaders' is called on the writer thread only."""

    def __init__(
        self,
        store: LedgerStore,
        deliver: Callable[[Loaded], None],
        *,
        snapshot_every: int | None = SNAPSHOT_EVERY,
        loaders: int = 2,
        idle_seconds: float = 600,
    ) -> None:
        """``deliver`` puts a loader's answer in the writer's queue; ``snapshot_every``: None for no
        snapshots (a tool that only reads, or a test that counts writes); ``idle_seconds``: a team
        no command has used for this long is dropped (loaded again, from its snapshot, when needed)."""
        self._store = store
        self._idle = idle_seconds
        self._used: dict[UUID, float] = {}
        self._swept = time.monotonic()
        self._deliver = deliver
        self._every = snapshot_every
        self.teams: dict[UUID, TeamLedger] = {}
        self._parked: dict[UUID, list[T]] = {}
        self._absent: set[UUID] = set()  # loaded and found not to exist, not looked for again just yet
        self._snapshot_at: dict[UUID, int] = {}  # the version of each team's latest snapshot we know of
        #: None: teams are loaded on the writer's thread when first needed (the simulator's one thread).
        self._loaders = (
            ThreadPoolExecutor(max_workers=loaders, thread_name_prefix="tollgate-ledger-loader") if loaders else None
        )
        self._snapshots: queue.SimpleQueue[TeamLedger | None] = queue.SimpleQueue()
        self._snapshotter = threading.Thread(target=self._take_snapshots, name="tollgate-ledger-snapshots", daemon=True)
        if snapshot_every is not None:
            self._snapshotter.start()

    # -- loading ------------------------------------------------------------------------------

    def admit(self, team_id: UUID, item: T) -> bool:
        """Whether ``item`` may be decided now (its team is here); if not, it is parked and its team
        is being loaded."""
        self._used[team_id] = time.monotonic()
        if team_id in self.teams:
            return True
        if self._loaders is None:
            self.load_now(team_id)  # here now, or found absent: the command that opens it makes it
            return True
        parked = self._parked.get(team_id)
        if parked is None:
            self._parked[team_id] = [item]
            self._loaders.submit(self._load, team_id)
        else:
            parked.append(item)
        return False

    def warm(self, team_ids: Iterable[UUID]) -> None:
        """Load these teams in the background now (commands for them park until they are here)."""
        for team_id in team_ids:
            if self._loaders is None:
                return
            if team_id not in self.teams and team_id not in self._parked:
                self._parked[team_id] = []
                self._loaders.submit(self._load, team_id)

    def arrived(self, loaded: Loaded) -> list[T]:
        """A loader's answer: keep the team, and return the commands parked for it, in order. A team
        that does not exist yet is not kept (the command that opens it makes it)."""
        if loaded.team is not None and loaded.error is None and loaded.team_id not in self.teams:
            self.teams[loaded.team_id] = loaded.team
            self._snapshot_at[loaded.team_id] = loaded.snapshot_version
        elif loaded.team is None and loaded.error is None:
            self._absent.add(loaded.team_id)
        return self._parked.pop(loaded.team_id, [])

    @property
    def loading(self) -> bool:
        return bool(self._parked)

    def load_now(self, team_id: UUID) -> TeamLedger | None:
        """The team, loaded on this thread if it is not here (a team just opened by another
        process, found while deciding again after a conflict: a few events)."""
        team = self.teams.get(team_id)
        if team is None and team_id in self._absent:
            self._absent.discard(team_id)  # the loader has just looked: once, trust it
            return None
        if team is None:
            team, at = self._store.load_team(team_id)
            if team is not None:
                self.teams[team_id] = team
                self._snapshot_at[team_id] = at
        return team

    def forget(self, team_id: UUID) -> None:
        """Drop our copy (a doubtful one): the next command loads the team again."""
        self.teams.pop(team_id, None)

    def drop_idle(self) -> None:
        """Drop the teams no command has used for ``idle_seconds``: memory stays bounded by the teams
        in use, and (when other processes write the same teams) a team's copy is never so far behind
        that catching it up on the writer thread would cost more than loading it from its snapshot."""
        now = time.monotonic()
        if now - self._swept < min(self._idle, 10.0):
            return
        self._swept = now
        for team_id in [t for t, used in self._used.items() if now - used > self._idle]:
            del self._used[team_id]
            if team_id not in self._parked:
                self.teams.pop(team_id, None)

    def _load(self, team_id: UUID) -> None:
        try:
            with timeline.span("team.load"):
                team, at = self._store.load_team(team_id, pause=_let_others_run)
        except Exception as exc:
            log.exception("could not load team %s", team_id)
            self._deliver(Loaded(team_id, None, 0, exc))
            return
        self._deliver(Loaded(team_id, team, at))

    # -- snapshots ----------------------------------------------------------------------------

    def committed(self, teams: dict[UUID, TeamLedger]) -> None:
        """These teams' events are durable: keep them, and snapshot any that is due."""
        self.teams.update(teams)
        if self._every is None:
            return
        for team_id, team in teams.items():
            if team.version - self._snapshot_at.get(team_id, 0) >= self._every:
                self._snapshot_at[team_id] = team.version
                self._snapshots.put(team.fork())

    def _take_snapshots(self) -> None:
        while (team := self._snapshots.get()) is not None:
            try:
                with timeline.span("team.snapshot", team.version):
                    self._store.team_snapshots.save([self._store.team_snapshots.take(team)])
            except Exception:
                log.warning(
                    "could not store a snapshot of team %s at version %d", team.name, team.version, exc_info=True
                )

    def close(self) -> None:
        """Stop loading, and store the snapshots already taken."""
        if self._loaders is not None:
            self._loaders.shutdown(wait=True)
        if self._snapshotter.is_alive():
            self._snapshots.put(None)
            self._snapshotter.join()


def _let_others_run() -> None:
    """Hand the interpreter lock to any thread waiting for it (the event loop, the writer, another
    loader): a loading team's replay is pure Python, and without this it would keep the lock for
    the interpreter's whole switch interval (5 ms) at a time, delaying every other team's requests."""
    time.sleep(0)
