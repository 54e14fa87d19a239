"""Monthly statements as files: written as CSV or JSON, read back, and verified against the ledger.

``tollgate ledger statement``, ``GET /admin/teams/{name}/statements/{month}`` and the dashboard's
download all write a statement here (:func:`statement_chunks`), so the three can never disagree; the
rows come from ``projections/statements.py`` (the team's events replayed) and, in the tamper-evident
form, carry the hash chain of ``projections/statement_chain.py``.

- **CSV**: one header line (:data:`COLUMNS`, then ``prev_hash`` when chained), a line per row — the
  month's entries in ledger order, then the summary rows, each naming its ``section`` — and, chained,
  a last line whose ``section`` is ``end`` and whose ``prev_hash`` is the final hash.
- **JSON**: one object: the team, the month and its bounds, ``entries`` (the rows of the month's
  entries), then one member per summary section (``charges_by_model`` and ``charges_by_key`` are
  lists), ``reconciled``, and, chained, ``genesis`` and ``final_hash``. A row there leaves out its
  team, month and section (the object says them) and any column it has no value for; whole numbers
  (micro-credits, tokens, counts, versions) are JSON numbers, credits exact decimal strings.

Both are written a chunk of rows at a time as the ledger is read: a month of a million charges is never
held whole. :func:`verify_statement` checks a chained file's chain (the first row that does not fit is
named) and, given the ledger, regenerates the statement up to the version its closing row names and
compares: a file whose chain was recomputed after it was altered still fails there.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from projections.event_store import LedgerStore
from projections.statement_chain import COLUMNS, PREV_HASH, Chain, cell, check_chain, describe, genesis
from projections.statements import SUMMARY_SECTIONS, Month, Statement

FORMATS = ("json", "csv")
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "json": "application/json"}
#: Rows written per chunk of a streamed statement.
CHUNK_ROWS = 500
#: The summary sections with a row each; the others (charges by model, by key) have a list.
_LISTS = ("charges_by_model", "charges_by_key")
_IMPLIED = ("team", "month", "section")  # a JSON row leaves these to the object it is in
#: Every section in the order its rows come; and those written as a list in JSON.
_ORDER = ("entry", *SUMMARY_SECTIONS)
_LISTED = ("entry", *_LISTS)


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
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for count, row in enumerate(rows, start=1):
        writer.writerow([cell(row.get(c)) for c in header])
        if count % CHUNK_ROWS == 0:
            yield _drain(out)
    if chain is not None:
        end = {"team": statement.team, "month": statement.month.text, "section": "end", PREV_HASH: chain.last}
        writer.writerow([cell(end.get(c)) for c in header])
    yield _drain(out)


def _drain(out: io.StringIO) -> str:
    text = out.getvalue()
    out.seek(0)
    out.truncate()
    return text


def _json_row(row: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in row.items() if k not in _IMPLIED and v is not None}, ensure_ascii=False)


def _json_chunks(statement: Statement, rows: Iterator[dict[str, Any]], chain: Chain | None) -> Iterator[str]:
    month = statement.month
    head = {"object": "ledger.statement", "team": statement.team, "month": month.text,
            "from": month.start.isoformat(), "to": month.end.isoformat(), "chained": chain is not None}
    if chain is not None:
        head["genesis"] = chain.genesis
    parts = [json.dumps(head, ensure_ascii=False)[:-1]]
    at = -1  # the section being written (an index of _ORDER); every section gets its member, a list may be empty

    def reach(section: int) -> None:
        nonlocal at
        while at < section:
            if at >= 0 and _ORDER[at] in _LISTED:
                parts.append("]")
            at += 1
            parts.append(f',\n"{_member(_ORDER[at])}": ' + ("[" if _ORDER[at] in _LISTED else ""))

    for count, row in enumerate(rows, start=1):
        section = _ORDER.index(row["section"])
        opened = section != at
        reach(section)
        listed = _ORDER[at] in _LISTED
        parts.append(("\n  " if opened else ",\n  ") + _json_row(row) if listed else _json_row(row))
        if count % CHUNK_ROWS == 0:
            yield "".join(parts)
            parts.clear()
    reach(len(_ORDER) - 1)
    tail: dict[str, Any] = {"reconciled": statement.figures.reconciled}
    if chain is not None:
        tail["final_hash"] = chain.last
    parts.append(",\n" + json.dumps(tail, ensure_ascii=False)[1:] + "\n")
    yield "".join(parts)


def _member(section: str) -> str:
    """The JSON member a section's rows are under."""
    return "entries" if section == "entry" else section


# -- reading a statement back ------------------------------------------------------------------------


class StatementFileError(ValueError):
    """A file that is not a statement this version of Tollgate writes; its message says why."""


@dataclass
class StatementFile:
    """A statement read from a file: its rows in chain order, where each is in the file, and its hashes."""

    fmt: str
    team: str
    month: str
    rows: list[dict[str, Any]]
    where: list[str]
    chained: bool
    final_hash: str = ""
    problems: list[str] = field(default_factory=list)  # what the file says beside its rows that does not fit


def read_statement(text: str) -> StatementFile:
    """A statement file's rows (CSV or JSON, told apart by its first character; a byte order mark, which
    spreadsheets write, is passed over)."""
    text = text.removeprefix("\ufeff")
    if text.lstrip().startswith("{"):
        return _read_json(text)
    return _read_csv(text)


def _read_csv(text: str) -> StatementFile:
    lines = list(csv.reader(io.StringIO(text)))
    if not lines:
        raise StatementFileError("the file is empty")
    header = tuple(lines[0])
    chained = header == (*COLUMNS, PREV_HASH)
    if not chained and header != COLUMNS:
        raise StatementFileError("its first line is not a statement's header line (the columns were changed, or it "
                                 "is not a statement)")
    rows, where = [], []
    for number, values in enumerate(lines[1:], start=2):
        if len(values) != len(header):
            raise StatementFileError(f"line {number} has {len(values)} cells, the header {len(header)}")
        rows.append(dict(zip(header, values, strict=True)))
        where.append(f"line {number}")
    if not rows:
        raise StatementFileError("the file has a header line and no rows")
    final = ""
    if chained:
        if rows[-1]["section"] != "end":
            raise StatementFileError("the file does not end with the final hash (its last line's section is not "
                                     "'end'): it was cut short, or its last line was removed")
        final = rows.pop()["prev_hash"]
        where.pop()
    return StatementFile("csv", rows[0]["team"], rows[0]["month"], rows, where, chained, final)


def _read_json(text: str) -> StatementFile:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise StatementFileError(f"not valid JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("object") != "ledger.statement":
        raise StatementFileError("not a statement (a JSON object whose 'object' is 'ledger.statement')")
    team, month = document.get("team"), document.get("month")
    if not isinstance(team, str) or not isinstance(month, str):
        raise StatementFileError("the statement does not say its team and month")
    rows: list[dict[str, Any]] = []
    where: list[str] = []
    problems: list[str] = []
    for section in _ORDER:
        member = _member(section)
        value = document.get(member)
        if section in _LISTED and not isinstance(value, list):
            raise StatementFileError(f"'{member}' is not a list")
        items = value if isinstance(value, list) else [value]
        for index, item in enumerate(items):
            place = f"{member}[{index}]" if isinstance(value, list) else member
            rows.append(_json_row_read(item, place, problems) | {"team": team, "month": month, "section": section})
            where.append(place)
    chained = document.get("chained") is True
    try:
        parsed = Month.parse(month)
        if (document.get("from"), document.get("to")) != (parsed.start.isoformat(), parsed.end.isoformat()):
            problems.append(f"'from' and 'to' are not the bounds of {month}")
    except ValueError as exc:
        problems.append(str(exc))
    if chained and document.get("genesis") != genesis(team, month):
        problems.append(f"'genesis' is not the genesis of team {team!r} and {month}")
    reconciliation = document.get("reconciliation")
    if isinstance(reconciliation, dict) and document.get("reconciled") != reconciliation.get("reconciled"):
        problems.append("'reconciled' is not what the reconciliation row says")
    final = document.get("final_hash", "")
    return StatementFile("json", team, month, rows, where, chained, final if isinstance(final, str) else "", problems)


def _json_row_read(item: Any, place: str, problems: list[str]) -> dict[str, Any]:
    """A row of a JSON statement, as its cells: a field a row does not have is a problem (the hash
    would not cover it); a value that is not text, a whole number or a flag is not a statement's."""
    if not isinstance(item, dict):
        raise StatementFileError(f"'{place}' is not an object")
    unknown = sorted(name for name in item if (name not in COLUMNS and name != PREV_HASH) or name in _IMPLIED)
    if unknown:
        problems.append(f"{place} has field(s) a statement row does not: {', '.join(unknown)}")
    for name, value in item.items():
        if value is not None and not isinstance(value, str | int):
            raise StatementFileError(f"{place}: '{name}' is {json.dumps(value)}, not text, a whole number or a flag")
    return dict(item)


# -- verifying it ---------------------------------------------------------------------------------------


@dataclass
class StatementCheck:
    """What verifying a statement file found: ``problem`` is None when it holds."""

    file: StatementFile
    problem: str | None = None
    against_ledger: bool = False  # whether it was regenerated from the ledger and compared
    ledger_version: int = 0  # the team's version the statement reaches (its closing row's)

    @property
    def ok(self) -> bool:
        return self.problem is None


def verify_statement(text: str, store: LedgerStore | None) -> StatementCheck:
    """Check a chained statement's chain; then, given the ledger's ``store``, regenerate the
    statement from the events and compare it row by row and by its final hash."""
    try:
        found = read_statement(text)
    except StatementFileError as exc:
        return StatementCheck(StatementFile("", "", "", [], [], False), f"not a statement Tollgate can read: {exc}")
    if not found.chained:
        return StatementCheck(found, "the statement has no hash chain: export it with --chained (chained=true) to "
                                     "verify it")
    if found.problems:
        return StatementCheck(found, found.problems[0])
    chain = check_chain(found.team, found.month, found.rows, found.final_hash, found.where)
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
        check.problem = _compare_with_ledger(found, store, month, version)
    return check


def _compare_with_ledger(found: StatementFile, store: LedgerStore, month: Month, version: int) -> str | None:
    """The first way the file differs from the statement the ledger gives now (None: it is that statement)."""
    chain = Chain(found.team, month.text)
    index = 0
    for index, row in enumerate(chain.links(Statement(store, found.team, month, upto=version).rows())):
        if index >= len(found.rows):
            return (f"the ledger gives this statement more rows than the file has ({len(found.rows)}): from "
                    f"{describe(row)} on, they are missing")
        mine = found.rows[index]
        differing = [c for c in COLUMNS if cell(mine.get(c)) != cell(row.get(c))]
        if differing:
            column = differing[0]
            return (f"row {index + 1} ({found.where[index]}), {describe(mine)}, is not what the ledger gives: its "
                    f"{column} is {cell(mine.get(column))!r} in the file, {cell(row.get(column))!r} in the ledger")
    rows = chain.rows
    if rows != len(found.rows):
        return (f"the file has {len(found.rows)} rows, the statement the ledger gives {rows}: from row {rows + 1} "
                f"({found.where[rows]}) on, they are not the ledger's")
    if chain.last != found.final_hash:
        return f"its final hash {found.final_hash[:16]}… is not the final hash the ledger gives ({chain.last[:16]}…)"
    return None
