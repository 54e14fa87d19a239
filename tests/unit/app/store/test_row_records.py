"""The usage and alert rows are records whose fields are their tables' columns: declared once.

The tables the migrations made must hold exactly those columns, in that order, or the projection's
INSERTs (which name the records' fields) and the reads (which build records from the rows) would
break on a ledger migrated rather than declared; and a row must come back as the record it was.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest

from app.store.alert_rows import ALERT_COLUMNS, AlertRow
from app.store.database import Sql
from app.store.event_store import LedgerStore, open_ledger_store
from app.store.storable import REPLACEMENT, Unstorable
from app.store.usage_rows import ATTRIBUTION_COLUMNS, SUMMED, USAGE_COLUMNS, AttributionRow, UsageRow, summed

USAGE = UsageRow(
    team_name="acme",
    key_id="k1",
    model="gpt",
    day="2026-11-28",
    requests=1,
    input_tokens=10,
    output_tokens=5,
    cache_write_tokens=2,
    cache_hit_tokens=3,
    cost=700,
)
ATTRIBUTED = AttributionRow(
    team_name="acme",
    dimension="tag:project",
    value="apollo",
    day="2026-11-28",
    requests=1,
    input_tokens=10,
    output_tokens=5,
    cache_write_tokens=2,
    cache_hit_tokens=3,
    cost=700,
)
ALERT = AlertRow(
    alert_id="al_1",
    notification_id=7,
    team_name="acme",
    kind="budget",
    threshold="80",
    value=800,
    budget_limit=1000,
    occurred_at="2026-11-28T10:00:00+00:00",
)


@pytest.fixture
def store(tmp_path) -> Iterator[LedgerStore]:
    from tests.support.backend import new_database_url

    opened = open_ledger_store(new_database_url(), tmp_path, pool_size=2)
    yield opened
    opened.close()


@pytest.mark.parametrize(
    ("table", "columns", "row"),
    [
        ("usage_daily", USAGE_COLUMNS, USAGE),
        ("usage_by_attribution", ATTRIBUTION_COLUMNS, ATTRIBUTED),
        ("alerts", ALERT_COLUMNS, ALERT),
    ],
)
def test_a_migrated_table_holds_its_records_fields_in_order_and_gives_the_record_back(
    store: LedgerStore, table: str, columns: tuple[str, ...], row: msgspec.Struct
) -> None:
    sql = Sql(store.database)
    try:
        with sql.transaction() as tx:
            tx.insert_many(f"INSERT INTO {table} ({', '.join(columns)})", [msgspec.structs.astuple(row)])
        stored = sql.query(f"SELECT * FROM {table}")
    finally:
        sql.close()
    assert [list(r) for r in stored] == [list(columns)]
    assert type(row)(**stored[0]) == row


def test_the_usage_tables_sum_the_same_counts_and_add_up_by_key() -> None:
    assert USAGE_COLUMNS[4:] == ATTRIBUTION_COLUMNS[4:] == SUMMED
    other = msgspec.structs.replace(ATTRIBUTED, value="gemini")
    assert summed([ATTRIBUTED, other, ATTRIBUTED]) == [
        msgspec.structs.replace(
            ATTRIBUTED,
            requests=2,
            input_tokens=20,
            output_tokens=10,
            cache_write_tokens=4,
            cache_hit_tokens=6,
            cost=1400,
        ),
        other,
    ]
    assert ATTRIBUTED.under("\x1f").key() == ("acme", "tag:project", "\x1f", "2026-11-28")


def test_a_record_is_stored_as_every_row_is() -> None:
    assert USAGE.storable() is USAGE
    assert msgspec.structs.replace(ALERT, team_name="a\x00b").storable().team_name == f"a{REPLACEMENT}b"
    with pytest.raises(Unstorable, match="64-bit"):
        msgspec.structs.replace(USAGE, cost=2**63).storable()
