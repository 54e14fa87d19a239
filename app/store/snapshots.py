"""Snapshots of the team aggregates: a cache of a team's state, never the truth.

A team with a long history would otherwise be loaded by replaying every event it ever had (25k
events a second: a minute for a busy week). A snapshot is the team's state at one version, taken
every ``snapshot_every`` events off the request path (``app/ledger/snapshotter.py``); a team loads
from its latest snapshot plus the events after it (``LedgerStore.find_team``).

The state is the eventsourcing library's own snapshot of the aggregate (``Snapshot.take``, which
the aggregate's ``class_version`` upcasts on read: ``domain/ledger_upcasts.py``), encoded by the
store's mapper (JSON; the state's records — each hold, each key, a budget — as the dictionary of
their fields, tagged with their name: :func:`register_state_transcodings`) and compressed
(zlib: half the size, a fraction of a millisecond), kept in a table
of our own (``team_snapshots``, migrated by alembic like every read model) with two more columns:
when the snapshot's last event happened, so a team can be read as it was at an instant; and a
digest of the state, so a corrupt row is noticed. A snapshot that cannot be read, fails its digest
or disagrees with the balances read model is ignored (the team is replayed from its events, which
only costs time), and ``tollgate ledger verify`` compares every snapshot with a full replay.
``tollgate ledger rebuild`` drops them all and writes them again from the replay.

The aggregate's state stays bounded whatever its history: its open holds, its keys, and the last
thousand released or lease-charged request ids (``domain/ledger.py``), never a list of its events.
"""

from __future__ import annotations

import hashlib
import logging
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID

from eventsourcing.domain import Snapshot
from eventsourcing.persistence import JSONTranscoder, StoredEvent, Transcoding
from msgspec.structs import asdict

from domain.auto_recharge import Recharge
from domain.budgets import Budget
from domain.credit_lot import Lot
from domain.ledger import TeamLedger
from domain.ledger_state import Hold, KeyPolicy, Payment

if TYPE_CHECKING:
    from eventsourcing.persistence import Mapper

    from app.store.read_models import ReadModelQueries

log = logging.getLogger("tollgate.snapshots")

#: A snapshot every this many events of a team, by default: loading a team then replays at most
#: this many events (about 3 ms on SQLite, 7 on PostgreSQL). A busy team's state is up to ~37 KB of
#: JSON (the last thousand lease-charged and expired request ids), ~16 KB compressed: snapshots add
#: about a tenth to the store.
SNAPSHOT_EVERY = 250
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_COLUMNS = "team_id, version, occurred_at_us, topic, state, digest"
_INSERT = f"INSERT INTO team_snapshots ({_COLUMNS}) VALUES ({', '.join(['{p}'] * 6)}) ON CONFLICT (team_id, version) "


def micros_since_epoch(moment: datetime) -> int:
    """An instant as whole microseconds since the Unix epoch (exact, unlike a float)."""
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


@dataclass(frozen=True, slots=True)
class SnapshotRow:
    team_id: UUID
    version: int
    occurred_at_us: int  # when the event at ``version`` happened
    topic: str
    state: bytes
    digest: str

    @property
    def intact(self) -> bool:
        return self.digest == state_digest(self.team_id, self.version, self.topic, self.state)


def state_digest(team_id: UUID, version: int, topic: str, state: bytes) -> str:
    """What a snapshot's ``digest`` column holds: SHA-256 over everything that makes the team."""
    head = f"{team_id.hex}:{version}:{topic}:".encode()
    return hashlib.sha256(head + state).hexdigest()


class _HoldAsDict(Transcoding):
    type = Hold
    name = "ledger_hold"

    def encode(self, obj: Hold) -> dict[str, object]:
        return asdict(obj)

    def decode(self, data: dict[str, Any]) -> Hold:
        return Hold(**data)


class _KeyPolicyAsDict(Transcoding):
    type = KeyPolicy
    name = "ledger_key"

    def encode(self, obj: KeyPolicy) -> dict[str, object]:
        return asdict(obj)

    def decode(self, data: dict[str, Any]) -> KeyPolicy:
        return KeyPolicy(**{**data, "models": tuple(data["models"]), "endpoints": tuple(data["endpoints"])})


class _LotAsDict(Transcoding):
    type = Lot
    name = "credit_lot"

    def encode(self, obj: Lot) -> dict[str, object]:
        return asdict(obj)

    def decode(self, data: dict[str, Any]) -> Lot:
        return Lot(**data)


class _PaymentAsDict(Transcoding):
    type = Payment
    name = "ledger_payment"

    def encode(self, obj: Payment) -> dict[str, object]:
        return asdict(obj)

    def decode(self, data: dict[str, Any]) -> Payment:
        return Payment(**{**data, "reversals": tuple(data["reversals"])})


class _RechargeAsDict(Transcoding):
    type = Recharge
    name = "auto_recharge"

    def encode(self, obj: Recharge) -> dict[str, object]:
        return asdict(obj)

    def decode(self, data: dict[str, Any]) -> Recharge:
        return Recharge(**data)


class _BudgetAsDict(Transcoding):
    type = Budget
    name = "budget"

    def encode(self, obj: Budget) -> dict[str, object]:
        return obj.as_record()

    def decode(self, data: dict[str, Any]) -> Budget | None:
        return Budget.from_record(data)


def register_state_transcodings(transcoder: JSONTranscoder) -> None:
    """How the team state's records are written in a snapshot (and read back): each as the
    dictionary of its fields, under a name that, once stored, never changes."""
    for transcoding in (
        _HoldAsDict(),
        _KeyPolicyAsDict(),
        _LotAsDict(),
        _PaymentAsDict(),
        _RechargeAsDict(),
        _BudgetAsDict(),
    ):
        transcoder.register(transcoding)


class Snapshots:
    """Takes, stores and reads the team snapshots of one ledger store (its mapper and connections)."""

    def __init__(self, mapper: Mapper[UUID], queries: ReadModelQueries) -> None:
        self._mapper = mapper
        self._db = queries

    # -- taking and storing ------------------------------------------------------------------

    def take(self, team: TeamLedger) -> SnapshotRow:
        """The row of ``team``'s state at its version (a team with no pending events)."""
        stored = self._mapper.to_stored_event(Snapshot.take(team))
        state = zlib.compress(bytes(stored.state), 1)
        return SnapshotRow(
            team.id,
            team.version,
            micros_since_epoch(team.modified_on),
            stored.topic,
            state,
            state_digest(team.id, team.version, stored.topic, state),
        )

    def save(self, rows: Iterable[SnapshotRow]) -> None:
        """Store snapshots; one already stored at the same version (another process took it) stays."""
        self._db.write_rows(_INSERT + "DO NOTHING", [_as_params(r) for r in rows])

    def replace(self, rows: Iterable[SnapshotRow]) -> None:
        """Store snapshots, replacing any stored at the same version (``ledger rebuild``)."""
        self._db.write_rows(
            _INSERT + "DO UPDATE SET occurred_at_us = excluded.occurred_at_us, "
            "topic = excluded.topic, state = excluded.state, digest = excluded.digest",
            [_as_params(r) for r in rows],
        )

    def drop_all(self) -> None:
        self._db.write_rows("DELETE FROM team_snapshots", [()])

    # -- reading ------------------------------------------------------------------------------

    def latest(
        self, team_id: UUID, *, upto_version: int | None = None, upto_us: int | None = None
    ) -> SnapshotRow | None:
        """The team's newest snapshot at or before a version, or an instant (microseconds)."""
        where = "team_id = {p}"
        params: list[Any] = [team_id.hex]
        if upto_version is not None:
            where += " AND version <= {p}"
            params.append(upto_version)
        if upto_us is not None:
            where += " AND occurred_at_us <= {p}"
            params.append(upto_us)
        rows = self._db.read_rows(
            f"SELECT {_COLUMNS} FROM team_snapshots WHERE {where} ORDER BY version DESC LIMIT 1", tuple(params)
        )
        return _row(rows[0]) if rows else None

    def restore(self, row: SnapshotRow) -> TeamLedger | None:
        """The team the snapshot holds, or None if it cannot stand in for the events (said in the log):
        corrupt, unreadable, of another aggregate, or taken before the team gained some state."""
        if not row.intact:
            log.warning(
                "snapshot of team %s at version %d fails its digest; replaying the team's events instead",
                row.team_id,
                row.version,
            )
            return None
        try:
            team = self.decode(row)
        except Exception as exc:  # noqa: BLE001 - a snapshot is a cache: one that cannot be read costs only time
            log.warning(
                "snapshot of team %s at version %d cannot be read (%s); replaying the team's events instead",
                row.team_id,
                row.version,
                exc,
            )
            return None
        if team is None:
            log.warning(
                "snapshot of team %s at version %d holds another aggregate; replaying its events instead",
                row.team_id,
                row.version,
            )
            return None
        if missing := _STATE_NAMES - vars(team).keys():
            # Taken before the aggregate gained this state: its events know it, the snapshot does not.
            log.info(
                "snapshot of team %s at version %d predates %s; replaying the team's events instead",
                row.team_id,
                row.version,
                ", ".join(sorted(missing)),
            )
            return None
        return team

    def decode(self, row: SnapshotRow) -> TeamLedger | None:
        """The team the row holds, whatever state it has (None: another aggregate, or another team or
        version than the row's); raises if it cannot be decoded. ``restore`` says whether to use it."""
        state = zlib.decompress(row.state)
        event = self._mapper.to_domain_event(StoredEvent(row.team_id, row.version, row.topic, state))
        team = cast(Snapshot, event).mutate(None)
        if not isinstance(team, TeamLedger) or team.id != row.team_id or team.version != row.version:
            return None
        return team

    def versions(self, team_id: UUID, after: int, limit: int = 100) -> list[int]:
        """The versions of the team's snapshots after ``after``, oldest first, at most ``limit``."""
        rows = self._db.read_rows(
            "SELECT version FROM team_snapshots WHERE team_id = {p} AND version > {p} ORDER BY version LIMIT {p}",
            (team_id.hex, after, limit),
        )
        return [int(r["version"]) for r in rows]

    def at_version(self, team_id: UUID, version: int) -> SnapshotRow | None:
        rows = self._db.read_rows(
            f"SELECT {_COLUMNS} FROM team_snapshots WHERE team_id = {{p}} AND version = {{p}}", (team_id.hex, version)
        )
        return _row(rows[0]) if rows else None

    def count(self) -> int:
        return int(self._db.read_rows("SELECT COUNT(*) AS n FROM team_snapshots")[0]["n"])

    def each_team(self, batch: int = 1000) -> Iterator[UUID]:
        """Every team that has a snapshot, a page at a time."""
        last = ""
        while True:
            rows = self._db.read_rows(
                "SELECT DISTINCT team_id FROM team_snapshots WHERE team_id > {p} ORDER BY team_id LIMIT {p}",
                (last, batch),
            )
            if not rows:
                return
            yield from (UUID(r["team_id"]) for r in rows)
            last = rows[-1]["team_id"]


def _state_names() -> frozenset[str]:
    """Every attribute a team's state has today (what its constructor sets)."""
    blank = object.__new__(TeamLedger)
    TeamLedger.__init__(blank, "")
    return frozenset(vars(blank))


_STATE_NAMES = _state_names()


def same_state(one: TeamLedger, other: TeamLedger) -> bool:
    """Whether two copies of a team hold the same state (what a snapshot must share with a replay)."""
    return _state(one) == _state(other)


def _state(team: TeamLedger) -> dict[str, Any]:
    return {name: value for name, value in vars(team).items() if name != "_pending_events"}


def _as_params(row: SnapshotRow) -> tuple[Any, ...]:
    return (row.team_id.hex, row.version, row.occurred_at_us, row.topic, row.state, row.digest)


def _row(row: Any) -> SnapshotRow:
    return SnapshotRow(
        UUID(row["team_id"]),
        int(row["version"]),
        int(row["occurred_at_us"]),
        row["topic"],
        bytes(row["state"]),
        row["digest"],
    )
