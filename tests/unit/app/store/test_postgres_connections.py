"""Every PostgreSQL connection the ledger opens gives up on a server that stops answering (a network
partition drops packets silently) within seconds, not TCP's quarter of an hour: the event store's
pool, and the plain connections of the projections, the probe and the log (``LIVENESS``)."""

from __future__ import annotations

import pytest

from app.store.database import LIVENESS, Sql
from app.store.event_store import open_ledger_store
from tests.support.backend import BACKEND, new_database_url

pytestmark = pytest.mark.skipif(BACKEND != "postgresql", reason="PostgreSQL's own connection settings")


def _options(connection: object) -> dict[str, str]:
    info = connection.pgconn.info  # type: ignore[attr-defined]
    return {o.keyword.decode(): (o.val or b"").decode() for o in info}


def test_every_connection_fails_within_seconds_when_the_server_stops_answering(tmp_path):
    store = open_ledger_store(new_database_url(), tmp_path, pool_size=1)
    try:
        with store.recorder.datastore.get_connection() as pooled:  # type: ignore[attr-defined]
            options = _options(pooled)
            server_side = {
                name: pooled.execute(f"SHOW {name}").fetchone()[name]
                for name in ("tcp_user_timeout", "tcp_keepalives_idle", "idle_in_transaction_session_timeout")
            }
        sql = Sql(store.database)
        try:
            plain = _options(sql._conn)
        finally:
            sql.close()
    finally:
        store.close()
    for found in (options, plain):
        assert {name: found[name] for name in LIVENESS} == {name: str(value) for name, value in LIVENESS.items()}
    assert int(options["tcp_user_timeout"]) <= 10_000  # unacknowledged data: the connection fails after 10 s
    # the server's end of the session too: a gateway cut off while holding locks loses them within seconds
    assert server_side == {
        "tcp_user_timeout": "10000",  # ms
        "tcp_keepalives_idle": "5",  # s
        "idle_in_transaction_session_timeout": "5s",
    }
