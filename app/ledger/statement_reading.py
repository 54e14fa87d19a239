"""Reading a statement file back, strictly: exactly what Tollgate writes, or a refusal saying why.

A statement is verified by the hash chain its rows carry (``projections/statement_chain.py``), and a
hash only vouches for what it covers. So whatever a file says beside its rows must be something the
verifier checks, and whatever it says must be read one way only:

- **JSON**: every member of the object and of each row is one the writer writes (``amount_due`` or
  ``payment_status`` beside the rows is refused, not ignored), each of the type it is written with
  (a row's whole numbers are JSON numbers, its credits decimal strings, ``reconciled`` a flag), and
  no object names a member twice — JSON readers disagree on which of two values they take (Python's
  the last, others the first), so a forged value put first would be what a person's tool shows while
  the verifier checked the other. ``NaN`` and ``Infinity`` are not JSON and are refused too.
- **CSV**: the header line is the statement's, every line has its cells, the rows' sections come in
  the statement's order (each summary row once), every row names the same team and month, and the
  final ``end`` line carries the final hash and nothing else; a cell is one the writer could have
  written (``app/spreadsheet_csv.py``: a formula left unmarked is not), read back as the text it held.

The rows come back in chain order, as text and numbers as the file has them, with where each one is
in the file (``line 5``, ``entries[3]``) for the messages.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec

from app.spreadsheet_csv import read_lines, restore, written_as_tollgate_writes
from projections.statement_anchor import SECTION as ANCHOR_SECTION
from projections.statement_chain import CHAIN_VERSION, FORM_COLUMNS, PREV_HASH, genesis
from projections.statements import SUMMARY_SECTIONS, Month

#: Every section in the order its rows come; and those a JSON statement writes as a list.
ORDER = ("entry", *SUMMARY_SECTIONS)
#: The sections of each form of statement: form 1 (before the log) has no checkpoint row.
FORM_ORDER = {1: tuple(s for s in ORDER if s != ANCHOR_SECTION), 2: ORDER}
LISTED = (
    "entry",
    "top_ups_by_kind",
    "auto_recharges",
    "charges_by_model",
    "charges_by_key",
    "expirations",
    "reversals",
)
IMPLIED = ("team", "month", "section")  # a JSON row leaves these to the object it is in

Credits = Annotated[str, msgspec.Meta(pattern=r"^-?[0-9]+(\.[0-9]+)?$")]
Hash = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}$")]


class _Cells(msgspec.Struct, forbid_unknown_fields=True):
    """A row's cells and the types the writer gives them (``projections/statements.py``); a test holds
    them to ``projections.statement_chain.COLUMNS``."""

    occurred_at: str | None = None
    version: int | None = None
    leaf: int | None = None
    kind: (
        Literal["top_up", "charge", "adjustment", "expiry", "refund", "dispute", "dispute_closed"]
        | Literal["paid", "promotional"]  # a top_ups_by_kind row's lot kind ("adjustment" is above)
        | Literal["started", "credited", "failed"]  # an auto_recharges row's
        | None
    ) = None
    key_id: str | None = None
    model: str | None = None
    endpoint: str | None = None
    request_id: str | None = None
    count: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_write_tokens: int | None = None
    cache_hit_tokens: int | None = None
    amount: Credits | None = None
    amount_micros: int | None = None
    uncollected: Credits | None = None
    uncollected_micros: int | None = None
    balance_after: Credits | None = None
    balance_after_micros: int | None = None
    reason: str | None = None
    reference: str | None = None
    reconciled: bool | None = None
    note: str | None = None
    prev_hash: Hash | None = None


class _CsvCells(_Cells, forbid_unknown_fields=True):
    """A CSV row's cells: it names its team, month and section itself."""

    team: str | None = None
    month: str | None = None
    section: str | None = None


class _Document(msgspec.Struct, forbid_unknown_fields=True):
    """A JSON statement: every member the writer writes (``app/ledger/statements.py``), and no other."""

    object: Literal["ledger.statement"]
    team: str
    month: str
    start: str = msgspec.field(name="from")
    to: str
    chained: bool
    entries: list[_Cells]
    opening_balance: _Cells
    top_ups: _Cells
    charges_by_model: list[_Cells]
    charges_by_key: list[_Cells]
    charges: _Cells
    adjustments: _Cells
    closing_balance: _Cells
    reconciliation: _Cells
    reconciled: bool
    #: The credit expired in the month (one row; empty in a month none expired, absent from
    #: statements written before credit lots).
    expirations: list[_Cells] = msgspec.field(default_factory=list)
    #: What refunds and disputes moved in the month (one row; empty in a month with none).
    reversals: list[_Cells] = msgspec.field(default_factory=list)
    #: The top-ups by the kind of credit they brought (empty unless some was not paid).
    top_ups_by_kind: list[_Cells] = msgspec.field(default_factory=list)
    #: Auto-recharge's attempts begun, credited and failed (empty in a month with none).
    auto_recharges: list[_Cells] = msgspec.field(default_factory=list)
    #: The log checkpoint the statement is anchored to (absent from statements of form 1).
    log_checkpoint: _Cells | None = None
    genesis: Hash | None = None
    final_hash: Hash | None = None


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
    form: int = CHAIN_VERSION  # the statement's form (projections/statement_chain.py)


def read_statement(text: str) -> StatementFile:
    """A statement file's rows (CSV or JSON, told apart by its first character; a byte order mark, which
    spreadsheets write, is passed over)."""
    text = text.removeprefix("\ufeff")
    if text.lstrip().startswith("{"):
        return _read_json(text)
    return _read_csv(text)


# -- JSON ---------------------------------------------------------------------------------------------


def _one_value_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        twice = next(name for name in names if names.count(name) > 1)
        raise StatementFileError(
            f"the member {twice!r} is given twice in one object: JSON readers disagree on "
            "which value they take, so a statement never repeats a member"
        )
    return dict(pairs)


def _not_json(constant: str) -> Any:
    raise StatementFileError(f"{constant} is not a JSON value")


def _schema_problem(exc: msgspec.ValidationError) -> str:
    """msgspec's message as a person reads it: ``$.entries[2]`` as ``entries[2]``."""
    found = re.fullmatch(r"(?s)(.*?)(?: - at `\$\.?([^`]*)`)?", str(exc))
    problem, path = (found.group(1), found.group(2)) if found else (str(exc), None)
    unknown = re.fullmatch(r"Object contains unknown field `(.*)`", problem)
    missing = re.fullmatch(r"Object missing required field `(.*)`", problem)
    if unknown:
        problem = f"'{unknown.group(1)}' is not a member a statement writes there (the hash chain would not cover it)"
    elif missing:
        problem = f"the statement has no '{missing.group(1)}'"
    return f"{path}: {problem}" if path else problem


def _json_value(text: str) -> Any:
    """The file's JSON value, or :class:`StatementFileError` for anything the reader cannot take as a
    statement's — never another exception: not JSON, a member named twice, ``NaN``, a whole number
    past the 4,300 digits Python reads as one, nesting past the interpreter's stack."""
    try:
        return json.loads(text, object_pairs_hook=_one_value_each, parse_constant=_not_json)
    except StatementFileError:
        raise
    except json.JSONDecodeError as exc:
        raise StatementFileError(f"not valid JSON: {exc}") from None
    except ValueError:  # the digit limit: no statement writes such a number
        raise StatementFileError("a number in it is longer than any a statement writes") from None
    except RecursionError:
        raise StatementFileError("it nests arrays and objects deeper than a statement does") from None


def _read_json(text: str) -> StatementFile:
    loaded = _json_value(text)
    if not isinstance(loaded, dict) or loaded.get("object") != "ledger.statement":
        raise StatementFileError("not a statement (a JSON object whose 'object' is 'ledger.statement')")
    try:
        document = msgspec.convert(loaded, _Document)
    except msgspec.ValidationError as exc:
        raise StatementFileError(_schema_problem(exc)) from None
    team, month = document.team, document.month
    parsed = _month(month)
    if (document.start, document.to) != (parsed.start.isoformat(), parsed.end.isoformat()):
        raise StatementFileError(f"'from' and 'to' are not the bounds of {month}")
    form = _json_form(document)
    rows: list[dict[str, Any]] = []
    where: list[str] = []
    for section in FORM_ORDER[form]:
        member = "entries" if section == "entry" else section
        value = loaded.get(member, [])  # expirations: absent from statements written before credit lots
        items = value if section in LISTED else [value]
        for index, item in enumerate(items):
            rows.append(item | {"team": team, "month": month, "section": section})
            where.append(f"{member}[{index}]" if section in LISTED else member)
    _columns_of_form(rows, where, form)
    if not document.chained and (document.genesis or document.final_hash):
        raise StatementFileError("the statement says it is not chained, yet carries hashes")
    if document.reconciled != next(r for r in rows if r["section"] == "reconciliation").get("reconciled"):
        raise StatementFileError("'reconciled' is not what the reconciliation row says")
    return StatementFile("json", team, month, rows, where, document.chained, document.final_hash or "", form)


def _json_form(document: _Document) -> int:
    """A JSON statement's form: a chained one's genesis says it; an unchained one of form 2 has its
    checkpoint row, form 1 none."""
    team, month = document.team, document.month
    if document.chained:
        form = next((f for f in FORM_COLUMNS if document.genesis == genesis(team, month, f)), None)
        if form is None:
            raise StatementFileError(f"'genesis' is not the genesis of team {team!r} and {month}")
    else:
        form = CHAIN_VERSION if document.log_checkpoint is not None else 1
    if form >= 2 and document.log_checkpoint is None:
        raise StatementFileError(f"the statement has no '{ANCHOR_SECTION}'")
    if form < 2 and document.log_checkpoint is not None:
        raise StatementFileError(f"'{ANCHOR_SECTION}' is not a member a statement of form {form} writes")
    return form


def _columns_of_form(rows: Sequence[dict[str, Any]], where: Sequence[str], form: int) -> None:
    """Every cell a row has is a column of its statement's form (a form 1 row has no ``leaf``: its
    chain would not cover it)."""
    columns = set(FORM_COLUMNS[form]) | {PREV_HASH}
    for row, place in zip(rows, where, strict=True):
        extra = sorted(set(row) - columns)
        if extra:
            raise StatementFileError(
                f"{place}: '{extra[0]}' is not a member a statement of form {form} writes (the hash chain would not "
                "cover it)"
            )


def _month(text: str) -> Month:
    try:
        return Month.parse(text)
    except ValueError as exc:
        raise StatementFileError(str(exc)) from None


# -- CSV ----------------------------------------------------------------------------------------------


def _csv_lines(text: str) -> Iterator[list[str]]:
    """The file's lines as their cells; what the ``csv`` module cannot read as CSV (a cell past its
    131,072 characters, which no statement writes) is :class:`StatementFileError`, naming the line."""
    lines = read_lines(text)
    while True:
        try:
            line = next(lines)
        except StopIteration:
            return
        except csv.Error as exc:
            raise StatementFileError(
                f"line {getattr(lines, 'line_num', '?')} is not CSV a statement writes: {exc}"
            ) from None
        yield line


def _read_csv(text: str) -> StatementFile:
    lines = _csv_lines(text)
    header = tuple(next(lines, ()))
    if not header:
        raise StatementFileError("the file is empty")
    headers = {
        (*columns, *chain): (form, bool(chain))
        for form, columns in FORM_COLUMNS.items()
        for chain in ((), (PREV_HASH,))
    }
    if header not in headers:
        raise StatementFileError(
            "its first line is not a statement's header line (the columns were changed, or it is not a statement)"
        )
    form, chained = headers[header]
    rows, where = [], []
    for number, written in enumerate(lines, start=2):
        rows.append(_csv_row(header, written, number))
        where.append(f"line {number}")
    if not rows:
        raise StatementFileError("the file has a header line and no rows")
    team, month = rows[0]["team"], rows[0]["month"]
    _month(month)
    for row, place in zip(rows, where, strict=True):
        if (row["team"], row["month"]) != (team, month):
            raise StatementFileError(
                f"{place} is of team {row['team']!r} and {row['month']}, the statement of team {team!r} and {month}"
            )
    final = ""
    if chained:
        end = rows.pop()
        if end["section"] != "end":
            raise StatementFileError(
                "the file does not end with the final hash (its last line's section is not "
                "'end'): it was cut short, or its last line was removed"
            )
        place = where.pop()
        if [c for c in header if end[c] and c not in (*IMPLIED, PREV_HASH)]:
            raise StatementFileError(
                f"{place}, the final hash's, has cells of its own (it holds the team, the "
                "month, 'end' and the final hash only)"
            )
        final = end[PREV_HASH]
    _sections_in_order([row["section"] for row in rows], where, FORM_ORDER[form])
    return StatementFile("csv", team, month, rows, where, chained, final, form)


def _csv_row(header: Sequence[str], written: Sequence[str], number: int) -> dict[str, str]:
    """A line's cells as the text they hold, checked against the types the writer gives them."""
    if len(written) != len(header):
        raise StatementFileError(f"line {number} has {len(written)} cells, the header {len(header)}")
    for column, cell in zip(header, written, strict=True):
        if not written_as_tollgate_writes(cell):
            raise StatementFileError(
                f"line {number}: its {column} {cell[:40]!r} is not a cell Tollgate writes (text "
                "a spreadsheet would take for a formula is written after a ')"
            )
    row = {column: restore(cell) for column, cell in zip(header, written, strict=True)}
    try:
        msgspec.convert({c: v for c, v in row.items() if v != ""}, _CsvCells, strict=False)
    except msgspec.ValidationError as exc:
        raise StatementFileError(f"line {number}: {_schema_problem(exc)}") from None
    return row


def _sections_in_order(sections: Iterable[str], where: Sequence[str], order: Sequence[str] = ORDER) -> None:
    """The rows' sections as a statement has them: the entries, then each summary section once (the
    charges by model and by key: as many as there are), in ``order`` (its form's)."""
    last, previous, seen = -1, "", set()
    for index, section in enumerate(sections):
        if section == previous and section in LISTED:
            continue
        step = order.index(section) if section in order else -1
        if step <= last:  # not a section, out of order, or a summary row given twice
            raise StatementFileError(
                f"{where[index]}: a row of section {section!r} cannot come here (a statement's "
                f"rows are the entries, then one row of each summary section, in the order "
                f"{', '.join(order[1:])})"
            )
        last, previous = step, section
        seen.add(section)
    missing = [section for section in order if section not in LISTED and section not in seen]
    if missing:
        raise StatementFileError(f"the statement has no row of section {missing[0]!r}")
