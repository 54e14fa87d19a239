"""Many rows in one statement: ``INSERT … VALUES (…), (…), …``.

A DB-API ``executemany`` runs its statement once per row, and Python's sqlite3 hands the
interpreter lock back and takes it again around every one of those steps. A thread that writes
while the event loop is busy then waits for the lock after each row — up to the switch interval,
5 ms, each time — and holds SQLite's write lock all the while (``tollgate bench --stalls``:
20-50 ms ledger batches of ten charges). One statement of many rows is one step: the lock is given
up once, whatever the row count. PostgreSQL takes the same statement (in one round trip).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Protocol

#: Rows per statement at most: at 20 columns, 2,560 parameters, under SQLite's 32,766 (and
#: PostgreSQL's 65,535). Statements have a power of two of rows (a batch of 45 is 32 + 8 + 4 + 1):
#: each connection keeps its prepared statements, about 1.7 KB per row of one, and one shape per
#: row count of 1 to 200 grew a gateway by 14 MB in a 10-minute soak; eight shapes a table do not.
ROWS_PER_STATEMENT = 128


class Cursor(Protocol):
    def execute(self, sql: str, params: Sequence[Any], /) -> Any: ...


def insert_rows(cursor: Cursor, head: str, rows: Sequence[Sequence[Any]], tail: str = "", marker: str = "?") -> None:
    """``head`` (``INSERT INTO t (a, b)``) ``VALUES`` one group per row ``tail`` (e.g. an ``ON
    CONFLICT`` clause), in statements of at most ``ROWS_PER_STATEMENT`` rows. A statement that
    touches one row twice is refused by PostgreSQL's ``ON CONFLICT DO UPDATE``: callers merge such
    rows first."""
    if not rows:
        return
    width, at = len(rows[0]), 0
    while at < len(rows):
        size = min(ROWS_PER_STATEMENT, 1 << ((len(rows) - at).bit_length() - 1))
        chunk = rows[at : at + size]
        cursor.execute(statement(head, tail, marker, width, size), [value for row in chunk for value in row])
        at += size


@lru_cache(maxsize=512)
def statement(head: str, tail: str, marker: str, width: int, rows: int) -> str:
    group = f"({', '.join([marker] * width)})"
    return f"{head} VALUES {', '.join([group] * rows)}{' ' + tail if tail else ''}"
