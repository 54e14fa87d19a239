"""The tamper-evident form of a monthly statement: every row carries the hash of the row before it.

A statement (``projections/statements.py``) is a list of rows — each ledger entry of the month in
ledger order, then the summary rows — with the same columns whether it is written as CSV or JSON.
Chained, each row also carries ``prev_hash``: the SHA-256 (hex) of the previous row's canonical bytes,
its own ``prev_hash`` included; the first row's is the statement's genesis, derived from its team and
month; and the statement ends with the final hash, the hash of its last row. Changing, inserting,
removing or reordering any row breaks the chain from there on, and :func:`check_chain` names the first
row that does not fit.

A row's canonical bytes are the same whichever format carried it: the JSON array (compact, UTF-8) of
its columns' values in :data:`COLUMNS` order then ``prev_hash``, each value as the text a CSV cell
holds (:func:`cell`: an absent value is ``""``, a whole number its digits, a flag ``true``/``false``).
So a statement exported as CSV and the same statement exported as JSON have the same final hash.

A chain recomputed after tampering is consistent with itself; only the ledger can tell it is not the
statement the ledger gives (``tollgate ledger verify --statement FILE`` regenerates it and compares),
and only the transparency log that it is the ledger that was (form 2: each entry names its event's
leaf, and the statement ends with the log checkpoint it was made from: ``app/ledger/statement_proof.py``).

Forms: 1 (before the log) has the columns of :data:`COLUMNS_V1`; 2 adds ``leaf`` and the
``log_checkpoint`` row. The form is part of the genesis, so a statement of one form cannot pass for
the other; statements of form 1 still verify, compared with the ledger over form 1's columns.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Every column of a statement row of form 1, in order (``prev_hash`` follows them in the chained form).
COLUMNS_V1 = (
    "team",
    "month",
    "section",
    "occurred_at",
    "version",
    "kind",
    "key_id",
    "model",
    "endpoint",
    "request_id",
    "count",
    "input_tokens",
    "output_tokens",
    "cache_write_tokens",
    "cache_hit_tokens",
    "amount",
    "amount_micros",
    "uncollected",
    "uncollected_micros",
    "balance_after",
    "balance_after_micros",
    "reason",
    "reference",
    "reconciled",
    "note",
)
#: Every column of a statement row, in order: form 1's and, after ``version``, the event's ``leaf``
#: index in the transparency log.
COLUMNS = (*COLUMNS_V1[:5], "leaf", *COLUMNS_V1[5:])
PREV_HASH = "prev_hash"
#: The version of the canonical form, part of every genesis: a later form cannot pass for this one.
CHAIN_VERSION = 2
#: Each form's columns.
FORM_COLUMNS = {1: COLUMNS_V1, 2: COLUMNS}

Row = Mapping[str, Any]


def cell(value: Any) -> str:
    """A value as the text a statement's CSV cell holds (and its canonical form hashes)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    raise TypeError(f"a statement cell holds text, a whole number or a flag, not {type(value).__name__}")


def canonical(row: Row, form: int = CHAIN_VERSION) -> bytes:
    """The bytes a row's hash is taken of: its cells in column order, then its ``prev_hash``."""
    return json.dumps(
        [cell(row.get(c)) for c in (*FORM_COLUMNS[form], PREV_HASH)], ensure_ascii=False, separators=(",", ":")
    ).encode()


def row_hash(row: Row, form: int = CHAIN_VERSION) -> str:
    return hashlib.sha256(canonical(row, form)).hexdigest()


def genesis(team: str, month: str, form: int = CHAIN_VERSION) -> str:
    """The first row's ``prev_hash``: fixed for a team, a month and a form, so a chain cannot be moved
    to another."""
    seed = json.dumps(["tollgate statement", form, team, month], separators=(",", ":"))
    return hashlib.sha256(seed.encode()).hexdigest()


class Chain:
    """Rows given their ``prev_hash`` as they pass (a stream: nothing is kept but the last hash)."""

    def __init__(self, team: str, month: str, form: int = CHAIN_VERSION) -> None:
        self.form = form
        self.genesis = genesis(team, month, form)
        self.last = self.genesis  # after the last row: the final hash
        self.rows = 0

    def link(self, row: Row) -> dict[str, Any]:
        """The row with its ``prev_hash``."""
        linked = {**row, PREV_HASH: self.last}
        self.last = row_hash(linked, self.form)
        self.rows += 1
        return linked

    def links(self, rows: Iterable[Row]) -> Iterator[dict[str, Any]]:
        return (self.link(row) for row in rows)


def chained(team: str, month: str, rows: Iterable[Row]) -> tuple[list[dict[str, Any]], str]:
    """Every row with its ``prev_hash``, and the final hash (for tests and small statements)."""
    chain = Chain(team, month)
    linked = list(chain.links(rows))
    return linked, chain.last


@dataclass(frozen=True, slots=True)
class ChainCheck:
    """What checking a chain found: ``problem`` is None when every row fits."""

    rows: int
    final_hash: str
    problem: str | None = None
    bad_row: int | None = None  # the first row that does not fit (0-based), if one can be named

    @property
    def ok(self) -> bool:
        return self.problem is None


def describe(row: Row) -> str:
    """A row as a person finds it in the file: its section and what identifies it there."""
    section = cell(row.get("section")) or "?"
    if section == "entry":
        what = cell(row.get("kind")) or "entry"
        return f"{what} at version {cell(row.get('version'))}" + (
            f" ({cell(row.get('request_id'))})" if row.get("request_id") else ""
        )
    for column in ("model", "key_id"):
        if row.get(column) and section.startswith("charges_by"):
            return f"{section} {cell(row.get(column))}"
    return section


def check_chain(
    team: str,
    month: str,
    rows: Sequence[Row],
    final_hash: str,
    where: Sequence[str] | None = None,
    form: int = CHAIN_VERSION,
) -> ChainCheck:
    """Whether ``rows`` are the chain they say they are: each ``prev_hash`` the hash of the row before
    (the genesis of ``team`` and ``month`` for the first) and ``final_hash`` the hash of the last.
    ``where`` says where each row is in its file (``line 5``, ``entries[3]``) for the message."""

    def named(index: int) -> str:
        place = f" ({where[index]})" if where is not None and index < len(where) else ""
        return f"row {index + 1}{place}, {describe(rows[index])}"

    hashes = [row_hash(row, form) for row in rows]
    position = {digest: index for index, digest in reversed(list(enumerate(hashes)))}  # hash → first row with it
    expected = genesis(team, month, form)
    for index, row in enumerate(rows):
        carried = cell(row.get(PREV_HASH))
        if carried != expected:
            bad, problem = _break(index, position.get(carried), genesis(team, month, form) == carried)
            return ChainCheck(len(rows), final_hash, f"{named(bad)}: {problem}", bad)
        expected = hashes[index]
    if final_hash != expected:
        if not rows:
            return ChainCheck(0, final_hash, "the statement has no rows, and its final hash is not its genesis")
        return ChainCheck(
            len(rows),
            final_hash,
            f"{named(len(rows) - 1)}: changed, or rows after it were removed — the statement's final "
            f"hash {final_hash[:16]}… is not the hash of its last row ({expected[:16]}…)",
            len(rows) - 1,
        )
    return ChainCheck(len(rows), final_hash)


def _break(index: int, follows: int | None, follows_genesis: bool) -> tuple[int, str]:
    """The first row that does not fit, and why, when row ``index``'s ``prev_hash`` is not the hash
    of the row before it but that of row ``follows`` (None: of no row in the file)."""
    if follows is not None or follows_genesis:
        after = "the genesis" if follows is None else f"row {follows + 1}"
        if follows is not None and follows >= index:
            return index, f"out of place: it follows {after}, which comes after it (rows were reordered)"
        return (follows + 1 if follows is not None else 0), (
            f"out of place: row {index + 1} follows {after}, so the rows from here to it were inserted, or rows "
            "were reordered"
        )
    if index == 0:
        return 0, (
            "its prev_hash is not the genesis of this team and month (rows were removed before it, or the "
            "statement's team or month was changed)"
        )
    return index - 1, (
        "changed (its content no longer hashes to the prev_hash the next row carries), or the rows "
        "after it were removed"
    )
