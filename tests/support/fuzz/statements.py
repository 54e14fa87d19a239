"""Generated mutations of a real chained statement, JSON or CSV, and whether a mutation changed what
the statement says.

``tollgate ledger verify --statement FILE`` must say "verified" (exit 0) only for the statement the
ledger gives: a member of its own beside the rows, a member named twice, a row dropped, moved or
doubled, a value changed (to another type, a huge number, a formula), the file cut short or not
UTF-8 — each must fail, and none may crash it. A mutation may leave the content as it was (a byte
order mark, other whitespace, another line ending): then either answer is fair, so
:func:`same_content` tells the two apart, reading both files as the README says a statement is read
(a byte order mark passed over, UTF-8, JSON members once each, values of their own types).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from projections.statement_chain import COLUMNS, PREV_HASH, chained
from tests.support.fuzz.attribution import ANY_CHAR

BOM = b"\xef\xbb\xbf"
SECTIONS = (
    "entries",
    "opening_balance",
    "top_ups",
    "charges_by_model",
    "charges_by_key",
    "charges",
    "adjustments",
    "closing_balance",
    "reconciliation",
    "log_checkpoint",
)
FORMULAS = [
    '=HYPERLINK("http://x","y")',
    "+cmd|' /C calc'!A0",
    "-1+2",
    "@SUM(A1)",
    "\t=1",
    "\r=1",
    "\uff1d1",
    "'=1",
    "=1",
]
#: Numbers as a file may spell them: huge, past a float, past Python's digit limit, negative zero.
NUMBERS = ["1" + "0" * 30, "9" * 5000, "1e400", "-0", "0.5", "1E2", "-" + "9" * 40, "00", "1.0"]
#: Text longer than any cell a statement writes (and than the csv module reads by default).
HUGE_TEXT = "x" * 200_000


class Obj(list[tuple[str, Any]]):
    """A JSON object as its members in order, so that one can be named twice."""


@dataclass(frozen=True)
class Number:
    """A number spelled as the file spells it."""

    text: str


def _tree(value: Any) -> Any:
    if isinstance(value, dict):
        return Obj((k, _tree(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_tree(v) for v in value]
    return value


def _dump(value: Any) -> str:
    if isinstance(value, Obj):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {_dump(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_dump(v) for v in value) + "]"
    if isinstance(value, Number):
        return value.text
    return json.dumps(value, ensure_ascii=False)


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths of the tree's scalar values (an index into an object is its member's position)."""
    if isinstance(value, Obj):
        return [p for i, (_, v) in enumerate(value) for p in _leaves(v, (*path, i))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaves(v, (*path, i))]
    return [path]


def _containers(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths of the tree's objects."""
    found = [path] if isinstance(value, Obj) else []
    items = [v for _, v in value] if isinstance(value, Obj) else value if isinstance(value, list) else []
    return found + [p for i, v in enumerate(items) for p in _containers(v, (*path, i))]


def _at(tree: Any, path: tuple[Any, ...]) -> Any:
    for i in path:
        tree = tree[i][1] if isinstance(tree, Obj) else tree[i]
    return tree


def _set(tree: Any, path: tuple[Any, ...], value: Any) -> None:
    parent, i = _at(tree, path[:-1]), path[-1]
    if isinstance(parent, Obj):
        parent[i] = (parent[i][0], value)
    else:
        parent[i] = value


# -- what a value may become ---------------------------------------------------------------------

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from(FORMULAS),
    st.text(ANY_CHAR.filter(lambda c: not 0xD800 <= ord(c) <= 0xDFFF), max_size=12),
    st.sampled_from(NUMBERS).map(Number),
    st.lists(st.integers(), max_size=2),
    st.builds(Obj, st.lists(st.tuples(st.text(max_size=5), st.integers()), max_size=2)),
)


def _rows_of(document: dict[str, Any]) -> list[dict[str, Any]]:
    """A JSON statement's rows, flat, as the chain hashes them."""
    rows = []
    for section in SECTIONS:
        value = document[section]
        for row in value if isinstance(value, list) else [value]:
            rows.append(
                {
                    **row,
                    "team": document["team"],
                    "month": document["month"],
                    "section": "entry" if section == "entries" else section,
                }
            )
    return rows


# -- JSON ----------------------------------------------------------------------------------------


def _json_mutation(draw: st.DrawFn, tree: Obj) -> None:
    """One change to the statement's tree, in place."""
    kind = draw(st.sampled_from(["member", "twice", "value", "value", "huge", "formula", "rows"]))
    if kind == "member":
        where = draw(st.sampled_from(_containers(tree)))
        at = draw(st.integers(0, len(_at(tree, where))))
        _at(tree, where).insert(
            at, (draw(st.sampled_from(["amount_due", "payment_status", "x", ""]) | st.text(max_size=8)), draw(VALUES))
        )
    elif kind == "twice":
        where = draw(st.sampled_from([p for p in _containers(tree) if _at(tree, p)]))
        members = _at(tree, where)
        name, value = members[draw(st.integers(0, len(members) - 1))]
        members.insert(draw(st.integers(0, len(members))), (name, draw(st.just(value) | VALUES)))
    elif kind in ("value", "huge", "formula"):
        path = draw(st.sampled_from(_leaves(tree)))
        new = draw(
            VALUES
            if kind == "value"
            else st.sampled_from(NUMBERS).map(Number) | st.just(HUGE_TEXT)
            if kind == "huge"
            else st.sampled_from(FORMULAS)
        )
        _set(tree, path, new)
    elif kind == "rows":
        entries = next(v for k, v in tree if k == "entries")
        if entries:
            i = draw(st.integers(0, len(entries) - 1))
            how = draw(st.sampled_from(["drop", "twice", "move"]))
            row = entries.pop(i) if how != "twice" else entries[i]
            if how != "drop":
                entries.insert(draw(st.integers(0, len(entries))), row)


def _forged_json(draw: st.DrawFn, text: str) -> str:
    """One row's value changed, and the chain recomputed after it: only the ledger can tell."""
    document = json.loads(text)
    rows = [{k: v for k, v in row.items() if k != PREV_HASH} for row in _rows_of(document)]
    row = draw(st.sampled_from(rows))
    field = draw(st.sampled_from([c for c in ("amount_micros", "reference", "model", "count") if c in row]))
    row[field] = (row[field] + draw(st.integers(1, 10**6))) if isinstance(row[field], int) else f"{row[field]}x"
    relinked, final = chained(document["team"], document["month"], rows)
    flat = iter(relinked)
    for section in SECTIONS:
        value = document[section]
        strip = ("team", "month", "section")
        fresh = [
            {k: v for k, v in next(flat).items() if k not in strip}
            for _ in (value if isinstance(value, list) else [value])
        ]
        document[section] = fresh if isinstance(value, list) else fresh[0]
    document["final_hash"] = final
    return json.dumps(document)


# -- CSV -----------------------------------------------------------------------------------------


def csv_text(rows: list[list[str]], newline: str = "\r\n") -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator=newline).writerows(rows)
    return out.getvalue()


def csv_rows(text: str) -> list[list[str]]:
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 24))  # the cells of HUGE_TEXT are read whole
    return list(csv.reader(io.StringIO(text, newline="")))


def _csv_mutation(draw: st.DrawFn, rows: list[list[str]]) -> None:
    """One change to the statement's rows, in place."""
    kind = draw(st.sampled_from(["cell", "cell", "formula", "huge", "width", "rows", "header"]))
    i = draw(st.integers(0, len(rows) - 1))
    if kind in ("cell", "formula", "huge"):
        j = draw(st.integers(0, len(rows[i]) - 1))
        values = {
            "cell": st.text(ANY_CHAR.filter(lambda c: not 0xD800 <= ord(c) <= 0xDFFF), max_size=10)
            | st.sampled_from(["", "true", "false", "0", "-1", "entry", "end", "charge"]),
            "formula": st.sampled_from(FORMULAS),
            "huge": st.sampled_from([*NUMBERS, HUGE_TEXT]),
        }[kind]
        rows[i][j] = draw(values)
    elif kind == "width":
        if draw(st.booleans()) or not rows[i]:
            rows[i].insert(draw(st.integers(0, len(rows[i]))), draw(st.text(max_size=6)))
        else:
            rows[i].pop(draw(st.integers(0, len(rows[i]) - 1)))
    elif kind == "rows":
        how = draw(st.sampled_from(["drop", "twice", "move"]))
        row = rows.pop(i) if how != "twice" else list(rows[i])
        if how != "drop":
            rows.insert(draw(st.integers(0, len(rows))), row)
    elif kind == "header":
        rows[0][draw(st.integers(0, len(rows[0]) - 1))] = draw(st.sampled_from(["amount_due", "", "Amount", "team"]))


def _forged_csv(draw: st.DrawFn, text: str) -> str:
    rows = list(csv.DictReader(io.StringIO(text, newline="")))[:-1]  # the last line is the end line (and the
    # genuine statement holds no cell longer than the csv module reads by default)
    data = [
        {k: (int(v) if k == "amount_micros" and v else v) for k, v in row.items() if k != PREV_HASH} for row in rows
    ]
    row = draw(st.sampled_from([r for r in data if r.get("section") == "entry"] or data))
    row["reference"] = f"{row.get('reference') or ''}x"
    relinked, final = chained(data[0]["team"], data[0]["month"], data)
    lines = [
        [*COLUMNS, PREV_HASH],
        *([str(r.get(c) if r.get(c) is not None else "") for c in (*COLUMNS, PREV_HASH)] for r in relinked),
    ]
    lines.append([data[0]["team"], data[0]["month"], "end", *[""] * (len(COLUMNS) - 3), final])
    return csv_text(lines)


# -- both ----------------------------------------------------------------------------------------


@st.composite
def mutated(draw: st.DrawFn, genuine: bytes, fmt: str) -> bytes:
    """``genuine`` with one to three mutations, or damaged as bytes, or forged (chain recomputed)."""
    text = genuine.decode("utf-8")
    how = draw(st.sampled_from(["content"] * 6 + ["forged", "truncated", "not_utf8", "bom", "empty", "respelled"]))
    if how == "forged":
        return (_forged_json(draw, text) if fmt == "json" else _forged_csv(draw, text)).encode()
    if how == "truncated":
        return genuine[: draw(st.integers(0, len(genuine) - 1))]
    if how == "not_utf8":
        at = draw(st.integers(0, len(genuine)))
        return genuine[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xe9"])) + genuine[at:]
    if how == "bom":
        return BOM * draw(st.integers(1, 2)) + genuine
    if how == "empty":
        return draw(
            st.sampled_from(
                [
                    b"",
                    b"{}",
                    b"[]",
                    b"null",
                    b"\n",
                    b"team,month\r\n",
                    b"[" * 100_000,
                    b'{"object": "ledger.statement", "x": ' + b"[" * 100_000,
                ]
            )
        )
    if how == "respelled":  # the same content written otherwise: other whitespace, other line endings
        if fmt == "json":
            return json.dumps(json.loads(text), indent=draw(st.sampled_from([None, 1, 4]))).encode()
        return csv_text(csv_rows(text), draw(st.sampled_from(["\n", "\r\n"]))).encode()
    if fmt == "json":
        tree = _tree(json.loads(text))
        for _ in range(draw(st.integers(1, 3))):
            _json_mutation(draw, tree)
        return _dump(tree).encode("utf-8")
    rows = csv_rows(text)
    for _ in range(draw(st.integers(1, 3))):
        _csv_mutation(draw, rows)
    return csv_text(rows).encode("utf-8")


def _tagged(value: Any) -> Any:
    """A JSON value with each scalar's type beside it (``1`` is not ``1.0`` nor ``true``); a member that
    is ``null`` or ``""`` is left out, as an absent one is: each is the same empty cell, to the hash
    chain (``projections/statement_chain.py``: ``cell``) and to whoever reads it."""
    if isinstance(value, dict):
        return {k: _tagged(v) for k, v in value.items() if v is not None and v != ""}
    if isinstance(value, list):
        return [_tagged(v) for v in value]
    return (type(value).__name__, repr(value))


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise ValueError("a member named twice")
    return dict(pairs)


def same_content(genuine: bytes, candidate: bytes, fmt: str) -> bool:
    """Whether ``candidate`` says what ``genuine`` says: the same JSON values of the same types, each
    member once (an empty one as good as absent); or the same CSV rows, cell for cell (a byte order
    mark before either is passed over)."""
    try:
        text = candidate.removeprefix(BOM).decode("utf-8")
        if fmt == "csv":
            return csv_rows(text) == csv_rows(genuine.decode("utf-8"))
        return _tagged(json.loads(text, object_pairs_hook=_unique)) == _tagged(json.loads(genuine))
    except (ValueError, RecursionError):
        return False


def findings(genuine: bytes, fmt: str) -> list[bytes]:
    """The issue's findings, which every run tries first: members of a statement's own beside its rows,
    a member named twice with the forged value first, a row with a cell of its own, the end cut off."""
    text = genuine.decode("utf-8")
    if fmt == "json":
        return [
            json.dumps({**json.loads(text), "amount_due": "0.00", "payment_status": "paid"}).encode(),
            text.replace('"closing_balance": {', '"closing_balance": {"amount": "1000000", ', 1).encode(),
            genuine[: len(genuine) // 2],
        ]
    lines = text.splitlines(keepends=True)
    return [
        "".join([lines[0], lines[1].rstrip("\r\n") + ",paid\r\n", *lines[2:]]).encode(),
        "".join(lines[:-1]).encode(),
    ]
