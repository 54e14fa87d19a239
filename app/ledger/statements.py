"""Monthly statements as files: written as CSV or JSON, and verified against the ledger.

``tollgate ledger statement``, ``GET /admin/teams/{name}/statements/{month}`` and the dashboard's
download all write a statement here (:func:`statement_chunks`), so the three can never disagree; the
rows come from ``projections/statements.py`` (the team's events replayed) and, in the tamper-evident
form, carry the hash chain of ``projections/statement_chain.py``.

- **CSV**: one header line (:data:`COLUMNS`, then ``prev_hash`` when chained), a line per row — the
  month's entries in ledger order, then the summary rows, each naming its ``section`` — and, chained,
  a last line whose ``section`` is ``end`` and whose ``prev_hash`` is the final hash. Written by the
  one CSV writer (``app/spreadsheet_csv.py``): text a spreadsheet would take for a formula is marked
  as text (``'=…``), and read back without the mark; the hash chain covers the text, not the mark, so
  the CSV and the JSON of one statement have the same final hash.
- **JSON**: one object: the team, the month and its bounds, ``entries`` (the rows of the month's
  entries), then one member per summary section (``charges_by_model`` and ``charges_by_key`` are
  lists), ``reconciled``, and, chained, ``genesis`` and ``final_hash``. A row there leaves out its
  team, month and section (the object says them) and any column it has no value for; whole numbers
  (micro-credits, tokens, counts, versions) are JSON numbers, credits exact decimal strings.

Both are written a chunk of rows at a time as the ledger is read: a month of a million charges is never
held whole. :func:`verify_statement` reads a file strictly (``app/ledger/statement_reading.py``),
checks its chain (the first row that does not fit is named) and, given the ledger, checks that a
month that is over is there to its last event, then regenerates the statement up to the version its
closing row names and compares: a file whose chain was recomputed after it was altered fails there.
Without the ledger, only the chain is checked, and the result says so.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.ledger.statement_proof import StatementProof, prove_statement
from app.ledger.statement_reading import IMPLIED, LISTED, ORDER, StatementFile, StatementFileError, read_statement
from app.spreadsheet_csv import CsvWriter
from app.store.event_store import LedgerStore
from domain import clock
from domain.ledger import TeamLedger, team_id
from domain.transparency.keys import NoteVerifier
from projections.statement_anchor import SECTION as ANCHOR_SECTION
from projections.statement_chain import COLUMNS, FORM_COLUMNS, PREV_HASH, Chain, cell, check_chain, describe
from projections.statements import Month, Statement, month_closed_at

FORMATS = ("json", "csv")
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "json": "application/json"}
#: Rows written per chunk of a streamed statement.
CHUNK_ROWS = 500


def file_name(team: str, month: str, fmt: str, chained: bool) -> str:
    return f"tollgate-{team}-statement-{month}{'-chained' if chained else ''}.{fmt}"


def statement_chunks(statement: Statement, fmt: str, chained: bool) -> Iterator[str]:
    """The statement as text, a chunk at a time (each chunk reads the ledger as far as it needs)."""
    rows = statement.rows()
    chain = Chain(statement.team, statement.month.text) if chained else None
    linked = chain.links(rows) if chain is not None else rows
    if fmt == "csv":
        return _csv_chunks(statement, linked, chain)
    return _json_chunks(statement, linked, chain)


def _csv_chunks(statement: Statement, rows: Iterator[dict[str, Any]], chain: Chain | None) -> Iterator[str]:
    header = (*COLUMNS, PREV_HASH) if chain is not None else COLUMNS
    out = io.StringIO()
    writer = CsvWriter(out)  # a reference, a reason or a model name may look like a formula
    writer.row(header)
    for count, row in enumerate(rows, start=1):
        writer.row([cell(row.get(c)) for c in header])
        if count % CHUNK_ROWS == 0:
            yield _drain(out)
    if chain is not None:
        end = {"team": statement.team, "month": statement.month.text, "section": "end", PREV_HASH: chain.last}
        writer.row([cell(end.get(c)) for c in header])
    yield _drain(out)


def _drain(out: io.StringIO) -> str:
    text = out.getvalue()
    out.seek(0)
    out.truncate()
    return text


def _json_row(row: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in row.items() if k not in IMPLIED and v is not None}, ensure_ascii=False)


def _json_chunks(statement: Statement, rows: Iterator[dict[str, Any]], chain: Chain | None) -> Iterator[str]:
    month = statement.month
    head = {
        "object": "ledger.statement",
        "team": statement.team,
        "month": month.text,
        "from": month.start.isoformat(),
        "to": month.end.isoformat(),
        "chained": chain is not None,
    }
    if chain is not None:
        head["genesis"] = chain.genesis
    parts = [json.dumps(head, ensure_ascii=False)[:-1]]
    at = -1  # the section being written (an index of ORDER); every section gets its member, a list may be empty

    def reach(section: int) -> None:
        nonlocal at
        while at < section:
            if at >= 0 and ORDER[at] in LISTED:
                parts.append("]")
            at += 1
            parts.append(f',\n"{_member(ORDER[at])}": ' + ("[" if ORDER[at] in LISTED else ""))

    for count, row in enumerate(rows, start=1):
        section = ORDER.index(row["section"])
        opened = section != at
        reach(section)
        listed = ORDER[at] in LISTED
        parts.append(("\n  " if opened else ",\n  ") + _json_row(row) if listed else _json_row(row))
        if count % CHUNK_ROWS == 0:
            yield "".join(parts)
            parts.clear()
    reach(len(ORDER) - 1)
    tail: dict[str, Any] = {"reconciled": statement.figures.reconciled}
    if chain is not None:
        tail["final_hash"] = chain.last
    parts.append(",\n" + json.dumps(tail, ensure_ascii=False)[1:] + "\n")
    yield "".join(parts)


def _member(section: str) -> str:
    """The JSON member a section's rows are under."""
    return "entries" if section == "entry" else section


# -- verifying it ---------------------------------------------------------------------------------------


@dataclass
class StatementCheck:
    """What verifying a statement file found: ``problem`` is None when it holds. Without the ledger
    only the chain was checked (``against_ledger`` false): a file whose hashes were recomputed after
    it was changed passes that, so the caller must not call it verified."""

    file: StatementFile
    problem: str | None = None
    against_ledger: bool = False  # whether it was regenerated from the ledger and compared
    ledger_version: int = 0  # the team's version the statement reaches (its closing row's)
    month_over: bool = False  # its month had ended (so the statement reaches the month's last event)
    proof: StatementProof | None = None  # its rows proven in the transparency log (form 2, with a log key)
    unproven: str = ""  # why its rows were not proven in the log, when they were not

    @property
    def ok(self) -> bool:
        return self.problem is None


def verify_statement(
    text: str,
    store: LedgerStore | None,
    now: datetime | None = None,
    log_key: NoteVerifier | None = None,
    trusted: bytes | None = None,
) -> StatementCheck:
    """Read a chained statement strictly and check its chain; then, given the ledger's ``store``,
    check that a month that is over (by ``now``, the ledger's clock) is there to its last event,
    regenerate the statement from the events and compare it row by row and by its final hash, and
    prove its rows are in the transparency log at the checkpoint it names (``statement_proof.py``:
    signed by ``log_key``; consistent with the caller's own ``trusted`` checkpoint, given one)."""
    try:
        found = read_statement(text)
    except StatementFileError as exc:
        return StatementCheck(StatementFile("", "", "", [], [], False), f"not a statement Tollgate can read: {exc}")
    if not found.chained:
        return StatementCheck(
            found, "the statement has no hash chain: export it with --chained (chained=true) to verify it"
        )
    chain = check_chain(found.team, found.month, found.rows, found.final_hash, found.where, found.form)
    if not chain.ok:
        return StatementCheck(found, f"the hash chain is broken at {chain.problem}")
    closing = [row for row in found.rows if row.get("section") == "closing_balance"]
    try:
        version = int(cell(closing[-1].get("version")))
        month = Month.parse(found.month)
    except (IndexError, ValueError):
        return StatementCheck(found, "the statement has no closing balance row naming its version, or no valid month")
    check = StatementCheck(found, ledger_version=version)
    if store is not None:
        check.against_ledger = True
        ended_at = month_closed_at(store, found.team, month, now or clock.now())
        check.month_over = ended_at is not None
        check.problem = _cut_short(found, store, version, ended_at) or _compare_with_ledger(
            found, store, month, version
        )
        if check.problem is None:
            _prove_in_log(check, store, log_key, trusted)
    return check


def _prove_in_log(
    check: StatementCheck, store: LedgerStore, log_key: NoteVerifier | None, trusted: bytes | None
) -> None:
    """The rows proven in the log, or why they were not; a statement that cannot be held to the
    caller's own checkpoint when one is given fails."""
    found = check.file
    anchor = next((row for row in found.rows if row.get("section") == ANCHOR_SECTION), None)
    if found.form < 2:
        check.unproven = "it is of form 1, written before statements named their leaves in the transparency log"
    elif anchor is None or cell(anchor.get("count")) == "":
        check.unproven = cell(anchor.get("note")) if anchor is not None else "it names no checkpoint"
    elif log_key is None:
        check.unproven = "no log key to check its checkpoint's signature with (--key, or [transparency] configured)"
    else:
        check.proof = prove_statement(found.rows, found.where, found.team, store, log_key, trusted)
        check.problem = check.proof.problem
        return
    if trusted is not None:
        check.problem = f"it cannot be proven consistent with your checkpoint: {check.unproven}"


def _cut_short(found: StatementFile, store: LedgerStore, version: int, ended_at: int | None) -> str | None:
    """Why a statement of a month that is over does not stand for it: it stops before the month's last
    event (it was read while the month went on, or its last entries were cut off and its chain
    recomputed). None if it reaches it, or the month goes on."""
    if ended_at is None or version >= ended_at:
        return None
    missing = sum(
        isinstance(event, TeamLedger.Charged)
        for event in store.events_after(team_id(found.team), version, upto=ended_at)
    )
    charges = sum(row.get("kind") == "charge" for row in found.rows)
    return (
        f"{found.month} is over, and the statement stops before its end: it reaches version {version}, the team's "
        f"last event of the month is version {ended_at} — it has {charges} charges, the month "
        f"{charges + missing}. It was read while the month was still going on, or cut short; the statement of "
        f"the whole month is `tollgate ledger statement --team {found.team} --month {found.month} --chained`"
    )


def _compare_with_ledger(found: StatementFile, store: LedgerStore, month: Month, version: int) -> str | None:
    """The first way the file differs from the statement the ledger gives now (None: it is that statement)."""
    chain = Chain(found.team, month.text, found.form)
    columns = FORM_COLUMNS[found.form]
    rows = Statement(store, found.team, month, upto=version).rows()
    if found.form < 2:  # a statement from before the log: compared as it was written
        rows = (row for row in rows if row["section"] != ANCHOR_SECTION)
    index = 0
    for index, row in enumerate(chain.links(rows)):
        if index >= len(found.rows):
            return (
                f"the ledger gives this statement more rows than the file has ({len(found.rows)}): from "
                f"{describe(row)} on, they are missing"
            )
        mine = found.rows[index]
        if mine.get("section") == ANCHOR_SECTION and cell(mine.get("count")) != cell(row.get("count")):
            return (
                f"row {index + 1} ({found.where[index]}), its log checkpoint, is not the one the ledger anchors the "
                f"statement to now (size {cell(row.get('count')) or 'none'}; the file's: "
                f"{cell(mine.get('count')) or 'none, it was read before a checkpoint held its last event'}): "
                "export the statement again"
            )
        differing = [c for c in columns if cell(mine.get(c)) != cell(row.get(c))]
        if differing:
            column = differing[0]
            return (
                f"row {index + 1} ({found.where[index]}), {describe(mine)}, is not what the ledger gives: its "
                f"{column} is {cell(mine.get(column))!r} in the file, {cell(row.get(column))!r} in the ledger"
            )
    count = chain.rows
    if count != len(found.rows):
        return (
            f"the file has {len(found.rows)} rows, the statement the ledger gives {count}: from row {count + 1} "
            f"({found.where[count]}) on, they are not the ledger's"
        )
    if chain.last != found.final_hash:
        return f"its final hash {found.final_hash[:16]}… is not the final hash the ledger gives ({chain.last[:16]}…)"
    return None
