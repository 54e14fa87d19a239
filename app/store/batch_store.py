"""A team's files and batches, as the database keeps them (the tables of ``app/store/schema.py``).

An upload's bytes go into ``gateway_file_chunks`` a chunk at a time as they arrive, and come out a
chunk at a time: no file is ever whole in a process's memory, and every gateway process sharing the
database serves every file. A file is visible only once its last chunk is stored (``processed``),
and only to its team: another team's file id reads as no file at all.

A batch's row says where it runs upstream and what the upstream last said of it; its money is the
ledger's (the batch's hold, its lines' charges). Which process polls a batch is decided here, by a
lease on the row (``claim``): one process at a time, whichever process that is, and another takes
over when the lease lapses (the poller died, or was killed).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from app.store.database import Database, Sql

#: The size of one stored chunk of an upload.
CHUNK_BYTES = 1024 * 1024
PROCESSED = "processed"
_FILE_COLUMNS = "file_id, team_name, purpose, filename, bytes, created_at, status, batch_id, upstream_file_id"
BATCH_COLUMNS = (
    "batch_id",
    "team_name",
    "key_id",
    "model",
    "api",
    "endpoint",
    "input_file_id",
    "deployment",
    "upstream_batch_id",
    "status",
    "hold",
    "lines",
    "attribution",
    "metadata",
    "upstream",
    "created_at",
    "settled",
    "charged",
)
#: What a batch's row may be updated with.
_UPDATABLE = frozenset({"upstream_batch_id", "status", "upstream", "settled", "charged"})


@dataclass(frozen=True, slots=True)
class StoredFile:
    file_id: str
    team_name: str
    purpose: str
    filename: str
    bytes: int
    created_at: int
    status: str
    batch_id: str = ""  # an output file's batch
    upstream_file_id: str = ""  # an output file's id at the upstream, where its bytes are


@dataclass(frozen=True, slots=True)
class StoredBatch:
    batch_id: str
    team_name: str
    key_id: str
    model: str
    api: str
    endpoint: str
    input_file_id: str
    deployment: int
    upstream_batch_id: str
    status: str
    hold: int
    lines: int
    attribution: str
    metadata: str
    upstream: str
    created_at: int
    settled: int
    charged: int


def _file(row: dict[str, Any]) -> StoredFile:
    return StoredFile(**row)


def _batch(row: dict[str, Any]) -> StoredBatch:
    return StoredBatch(**row)


class BatchStore:
    """Files and batches on the ledger's database, over one connection used a call at a time."""

    def __init__(self, database: Database) -> None:
        self._database = database
        self._sql: Sql | None = None
        self._lock = threading.Lock()

    def _conn(self) -> Sql:
        if self._sql is None:
            self._sql = Sql(self._database, any_thread=True)
        return self._sql

    def close(self) -> None:
        with self._lock:
            if self._sql is not None:
                self._sql.close()
                self._sql = None

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._lock:
            return self._conn().query(sql, params)

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self._lock, self._conn().transaction() as tx:
            return tx.execute(sql, params)

    # -- files -----------------------------------------------------------------------------------

    def add_file(self, stored: StoredFile) -> None:
        """A new file's row (an upload's ``uploading`` until :meth:`finish_file`)."""
        self._execute(
            f"INSERT INTO gateway_files ({_FILE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                stored.file_id,
                stored.team_name,
                stored.purpose,
                stored.filename,
                stored.bytes,
                stored.created_at,
                stored.status,
                stored.batch_id,
                stored.upstream_file_id,
            ),
        )

    def add_chunk(self, file_id: str, seq: int, data: bytes) -> None:
        self._execute("INSERT INTO gateway_file_chunks (file_id, seq, data) VALUES (?, ?, ?)", (file_id, seq, data))

    def finish_file(self, file_id: str, size: int) -> None:
        self._execute("UPDATE gateway_files SET status = ?, bytes = ? WHERE file_id = ?", (PROCESSED, size, file_id))

    def drop_file(self, file_id: str) -> None:
        """Forget an upload that never finished (its client went away, or it was refused)."""
        with self._lock, self._conn().transaction() as tx:
            tx.execute("DELETE FROM gateway_file_chunks WHERE file_id = ?", (file_id,))
            tx.execute("DELETE FROM gateway_files WHERE file_id = ?", (file_id,))

    def find_file(self, team_name: str, file_id: str) -> StoredFile | None:
        """The team's file (None: no such file, not the team's, deleted, or not yet stored whole)."""
        rows = self._query(
            f"SELECT {_FILE_COLUMNS} FROM gateway_files WHERE file_id = ? AND team_name = ? AND status = ?",
            (file_id, team_name, PROCESSED),
        )
        return _file(rows[0]) if rows else None

    def output_file(self, batch_id: str, upstream_file_id: str) -> StoredFile | None:
        rows = self._query(
            f"SELECT {_FILE_COLUMNS} FROM gateway_files WHERE batch_id = ? AND upstream_file_id = ?",
            (batch_id, upstream_file_id),
        )
        return _file(rows[0]) if rows else None

    def list_files(self, team_name: str, purpose: str | None, limit: int, after: str | None) -> list[StoredFile]:
        """The team's files, newest first, ``limit`` of them after the file ``after``."""
        sql = f"SELECT {_FILE_COLUMNS} FROM gateway_files WHERE team_name = ? AND status = ?"
        params: list[Any] = [team_name, PROCESSED]
        if purpose:
            sql += " AND purpose = ?"
            params.append(purpose)
        if after:
            sql += " AND (created_at, file_id) < (SELECT created_at, file_id FROM gateway_files WHERE file_id = ?)"
            params.append(after)
        return [
            _file(r) for r in self._query(f"{sql} ORDER BY created_at DESC, file_id DESC LIMIT {int(limit)}", params)
        ]

    def delete_file(self, team_name: str, file_id: str) -> bool:
        """Delete the team's file and its bytes; False if it had none such."""
        with self._lock, self._conn().transaction() as tx:
            if not tx.execute(
                "UPDATE gateway_files SET status = 'deleted' WHERE file_id = ? AND team_name = ? AND status = ?",
                (file_id, team_name, PROCESSED),
            ):
                return False
            tx.execute("DELETE FROM gateway_file_chunks WHERE file_id = ?", (file_id,))
            return True

    def chunks(self, file_id: str) -> Iterator[bytes]:
        """An upload's bytes, a chunk at a time (each read on its own: only one is ever in memory)."""
        seq = 0
        while True:
            rows = self._query("SELECT data FROM gateway_file_chunks WHERE file_id = ? AND seq = ?", (file_id, seq))
            if not rows:
                return
            yield bytes(rows[0]["data"])
            seq += 1

    # -- batches ---------------------------------------------------------------------------------

    def add_batch(self, batch: StoredBatch) -> None:
        values = tuple(getattr(batch, c) for c in BATCH_COLUMNS)
        self._execute(
            f"INSERT INTO gateway_batches ({', '.join(BATCH_COLUMNS)}) VALUES ({', '.join('?' * len(values))})",
            values,
        )

    def update_batch(self, batch_id: str, **fields: Any) -> None:
        unknown = set(fields) - _UPDATABLE
        if unknown:
            raise ValueError(f"a batch's {sorted(unknown)} are not updated")
        assignments = ", ".join(f"{name} = ?" for name in fields)
        self._execute(f"UPDATE gateway_batches SET {assignments} WHERE batch_id = ?", (*fields.values(), batch_id))

    def note_cancelling(self, batch_id: str, status: str, upstream: str) -> bool:
        """Record the upstream's answer to a cancellation, unless the batch has settled meanwhile (its
        poller may settle it while the cancellation is on its way): False then, the row untouched."""
        return bool(
            self._execute(
                "UPDATE gateway_batches SET status = ?, upstream = ? WHERE batch_id = ? AND settled = 0",
                (status, upstream, batch_id),
            )
        )

    def find_batch(self, batch_id: str, team_name: str | None = None) -> StoredBatch | None:
        """The batch (only if it is ``team_name``'s, when given)."""
        sql = f"SELECT {', '.join(BATCH_COLUMNS)} FROM gateway_batches WHERE batch_id = ?"
        params: list[Any] = [batch_id]
        if team_name is not None:
            sql += " AND team_name = ?"
            params.append(team_name)
        rows = self._query(sql, params)
        return _batch(rows[0]) if rows else None

    def list_batches(self, team_name: str, api: str, limit: int, after: str | None) -> list[StoredBatch]:
        sql = f"SELECT {', '.join(BATCH_COLUMNS)} FROM gateway_batches WHERE team_name = ? AND api = ?"
        params: list[Any] = [team_name, api]
        if after:
            sql += " AND (created_at, batch_id) < (SELECT created_at, batch_id FROM gateway_batches WHERE batch_id = ?)"
            params.append(after)
        rows = self._query(f"{sql} ORDER BY created_at DESC, batch_id DESC LIMIT {int(limit)}", params)
        return [_batch(r) for r in rows]

    def open_batches(self) -> list[StoredBatch]:
        """Every batch not yet settled, oldest first."""
        rows = self._query(
            f"SELECT {', '.join(BATCH_COLUMNS)} FROM gateway_batches WHERE settled = 0 ORDER BY created_at, batch_id"
        )
        return [_batch(r) for r in rows]

    def claim(self, batch_id: str, poller: str, now: float, until: float) -> bool:
        """Take (or keep) the turn to poll the batch until ``until``: True if this ``poller`` has it,
        False while another's lease on it runs. One statement: two processes never both win."""
        return (
            self._execute(
                "UPDATE gateway_batches SET poller = ?, poll_until = ? "
                "WHERE batch_id = ? AND settled = 0 AND (poller = ? OR poll_until < ?)",
                (poller, until, batch_id, poller, now),
            )
            == 1
        )
