"""Many rows in one statement, on the ledger's real database."""

from __future__ import annotations

from app.store.many_rows import ROWS_PER_STATEMENT, insert_rows, statement
from app.store.usage_rows import UsageRow, summed


def test_a_statement_has_one_group_of_markers_per_row():
    sql = statement("INSERT INTO t (a, b)", "ON CONFLICT (a) DO NOTHING", "%s", 2, 3)
    assert sql == "INSERT INTO t (a, b) VALUES (%s, %s), (%s, %s), (%s, %s) ON CONFLICT (a) DO NOTHING"


def test_statements_have_a_power_of_two_of_rows_so_few_shapes_are_ever_prepared():
    executed: list[tuple[str, int]] = []

    class Recording:
        def execute(self, sql: str, params: list[object], /) -> None:
            executed.append((sql, len(params)))

    insert_rows(Recording(), "INSERT INTO t (a)", [(i,) for i in range(45)])
    assert [n for _, n in executed] == [32, 8, 4, 1]
    executed.clear()
    for rows in range(1, 300):
        insert_rows(Recording(), "INSERT INTO t (a)", [(i,) for i in range(rows)])
    assert len({sql for sql, _ in executed}) == 8  # 1, 2, 4, … 128 rows


def _usage(key_id: str, *counts: int) -> UsageRow:
    requests, input_tokens, output_tokens, cache_write_tokens, cache_hit_tokens, cost = counts
    return UsageRow(
        team_name="acme",
        key_id=key_id,
        model="gpt",
        day="2026-11-25",
        requests=requests,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_write_tokens=cache_write_tokens,
        cache_hit_tokens=cache_hit_tokens,
        cost=cost,
    )


def test_usage_of_one_team_key_model_and_day_is_summed_into_one_row():
    rows = [_usage("k1", 1, 10, 5, 0, 0, 700), _usage("k2", 1, 1, 1, 0, 0, 9), _usage("k1", 1, 20, 6, 1, 2, 300)]
    assert summed(rows) == [_usage("k1", 2, 30, 11, 1, 2, 1000), _usage("k2", 1, 1, 1, 0, 0, 9)]
    assert summed(rows)[0].values() == ("acme", "k1", "gpt", "2026-11-25", 2, 30, 11, 1, 2, 1000)


def test_more_rows_than_one_statement_takes_are_all_written(tmp_path):
    from app.store.database import Database, Sql

    database = Database("sqlite", path=tmp_path / "rows.db")
    sql = Sql(database)
    sql.query("CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT)")
    rows = [(i, f"row {i}") for i in range(ROWS_PER_STATEMENT * 2 + 7)]
    with sql.transaction() as tx:
        tx.insert_many("INSERT INTO t (a, b)", rows)
    assert sql.tuples("SELECT a, b FROM t ORDER BY a") == rows
    sql.close()
