"""The statement's hash chain: every row carries the hash of the row before it, the first the genesis of
its team and month; any changed, inserted, removed or reordered row breaks it, and the first row that
does not fit is named."""

from __future__ import annotations

import hashlib
import itertools
import json

import pytest

from projections.statement_chain import (
    COLUMNS,
    PREV_HASH,
    Chain,
    canonical,
    cell,
    chained,
    check_chain,
    genesis,
    row_hash,
)


def _rows() -> list[dict]:
    common = {"team": "acme", "month": "2026-11"}
    return [
        {
            **common,
            "section": "entry",
            "version": 2,
            "kind": "top_up",
            "amount": "100",
            "amount_micros": 100_000_000,
            "reference": "opening balance",
        },
        {
            **common,
            "section": "entry",
            "version": 5,
            "kind": "charge",
            "model": "m",
            "key_id": "k1",
            "request_id": "r1",
            "input_tokens": 10,
            "amount": "-0.000125",
            "amount_micros": -125,
        },
        {
            **common,
            "section": "entry",
            "version": 6,
            "kind": "adjustment",
            "amount": "-5",
            "amount_micros": -5_000_000,
            "reason": "billed twice",
            "reference": "T-1",
        },
        {**common, "section": "opening_balance", "version": 1, "amount": "0", "amount_micros": 0},
        {**common, "section": "closing_balance", "version": 6, "amount": "94.999875", "amount_micros": 94_999_875},
        {**common, "section": "reconciliation", "reconciled": True, "note": 'reconciled: ü, "quoted", a,b'},
    ]


def test_each_row_carries_the_hash_of_the_row_before_it_and_the_first_the_genesis():
    rows, final = chained("acme", "2026-11", _rows())
    assert rows[0][PREV_HASH] == genesis("acme", "2026-11")
    for before, row in itertools.pairwise(rows):
        assert row[PREV_HASH] == hashlib.sha256(canonical(before)).hexdigest()
    assert final == row_hash(rows[-1])
    assert check_chain("acme", "2026-11", rows, final).ok


def test_the_genesis_is_fixed_for_a_team_and_month_and_differs_for_any_other():
    assert genesis("acme", "2026-11") == genesis("acme", "2026-11")
    assert (
        len(
            {
                genesis("acme", "2026-11"),
                genesis("acme", "2026-12"),
                genesis("acme2", "026-11"),
                genesis("acme-2026", "11"),
            }
        )
        == 4
    )
    rows, final = chained("acme", "2026-11", _rows())
    moved = check_chain("acme", "2026-12", rows, final)
    assert not moved.ok
    assert moved.bad_row == 0
    assert "genesis" in (moved.problem or "")


def test_a_cell_is_the_same_text_whichever_format_carried_it():
    """CSV gives every cell as text, JSON whole numbers and flags: the canonical bytes are the same."""
    rows, _ = chained("acme", "2026-11", _rows())
    as_csv = [{c: cell(row.get(c)) for c in (*COLUMNS, PREV_HASH)} for row in rows]
    as_json = [json.loads(json.dumps(row)) for row in rows]
    assert [canonical(r) for r in as_csv] == [canonical(r) for r in rows] == [canonical(r) for r in as_json]
    assert (cell(None), cell(""), cell(0), cell(-125), cell(True), cell(False)) == (
        "",
        "",
        "0",
        "-125",
        "true",
        "false",
    )
    with pytest.raises(TypeError):
        cell(1.5)


def test_the_canonical_bytes_cover_every_column_and_the_prev_hash():
    row = _rows()[1]
    linked = {**row, PREV_HASH: "a" * 64}
    for column in (*COLUMNS, PREV_HASH):
        changed = {**linked, column: "x" if linked.get(column) != "x" else "y"}
        assert row_hash(changed) != row_hash(linked), column
    # no two columns can trade text: the cells are a JSON array, not a joined string
    assert canonical({"reason": "a,b"}) != canonical({"reason": "a", "reference": "b"})


@pytest.mark.parametrize("column", ["amount_micros", "note", "reconciled", "version", "team"])
def test_a_changed_row_is_named_as_the_first_bad_row(column):
    rows, final = chained("acme", "2026-11", _rows())
    index = 5 if column in ("note", "reconciled") else 4
    rows[index] = {**rows[index], column: "1" if rows[index].get(column) != "1" else "2"}
    found = check_chain("acme", "2026-11", rows, final, [f"line {n}" for n in range(2, 2 + len(rows))])
    assert not found.ok
    assert found.bad_row == index
    assert (found.problem or "").startswith(f"row {index + 1} (line {index + 2})")


def test_a_changed_first_row_is_named():
    rows, final = chained("acme", "2026-11", _rows())
    rows[0]["amount_micros"] = 200_000_000
    found = check_chain("acme", "2026-11", rows, final)
    assert (found.bad_row, found.problem and found.problem.split(":")[0]) == (0, "row 1, top_up at version 2")


def test_a_removed_row_fails():
    rows, final = chained("acme", "2026-11", _rows())
    for index in range(len(rows)):
        found = check_chain("acme", "2026-11", rows[:index] + rows[index + 1 :], final)
        assert not found.ok, index
        assert found.bad_row is not None
        assert found.bad_row <= max(index, 0) or index == len(rows) - 1


def test_an_inserted_row_fails_and_is_named_even_with_a_fitting_prev_hash():
    rows, final = chained("acme", "2026-11", _rows())
    forged = {**rows[1], "request_id": "r-forged", PREV_HASH: row_hash(rows[1])}  # fits after row 2…
    found = check_chain("acme", "2026-11", [*rows[:2], forged, *rows[2:]], final)
    assert not found.ok  # …but row 3 (now 4) does not follow it
    assert found.bad_row == 2
    assert "inserted" in (found.problem or "")


def test_reordered_rows_fail():
    rows, final = chained("acme", "2026-11", _rows())
    swapped = [rows[0], rows[2], rows[1], *rows[3:]]
    found = check_chain("acme", "2026-11", swapped, final)
    assert not found.ok
    assert found.bad_row == 1
    assert "out of place" in (found.problem or "")


def test_the_final_hash_must_be_the_last_rows_and_is_changed_by_any_row():
    rows, final = chained("acme", "2026-11", _rows())
    cut = check_chain("acme", "2026-11", rows[:-1], final)
    assert not cut.ok
    assert "final hash" in (cut.problem or "")
    assert not check_chain("acme", "2026-11", rows, "0" * 64).ok
    other = _rows()
    other[2]["reason"] = "billed thrice"
    assert chained("acme", "2026-11", other)[1] != final


def test_a_chain_recomputed_after_a_change_is_consistent_with_itself():
    """The chain alone cannot tell: this is why verification regenerates the statement from the ledger."""
    rows = _rows()
    rows[1]["amount_micros"] = -124
    relinked, final = chained("acme", "2026-11", rows)
    assert check_chain("acme", "2026-11", relinked, final).ok


def test_the_chain_streams_rows_keeping_only_the_last_hash():
    chain = Chain("acme", "2026-11")
    linked = list(chain.links(iter(_rows())))
    assert (chain.rows, chain.last) == (len(linked), chained("acme", "2026-11", _rows())[1])
