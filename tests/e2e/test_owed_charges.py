"""A stream whose charge the ledger cannot record — its database stopped taking writes while it
ran — was delivered all the same: its charge is kept and made when the database is back, exactly once.

The database really turns read-only mid-stream (as when it fails over to a standby, or its disk
fills). This runs on PostgreSQL whatever the suite's backend: there a refused write fails a commit at
once, whereas SQLite's writer waits out its 30 s lock timeout first (the same code path, only slower)."""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import openai
import pytest

from tests.support import plain_http
from tests.support.backend import RawDatabase, _admin, new_postgres_database_url
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.outages import wait_for
from tests.support.teams import Teams

WORDS = " ".join(f"word{i}" for i in range(20))


@contextmanager
def database_read_only(gateway: Gateway) -> Iterator[None]:
    """The gateway's PostgreSQL database refuses every write until the block ends."""
    dbname = RawDatabase.of_config(gateway.config).db.dbname
    with _admin() as admin:

        def reconnect_everyone() -> None:  # sessions take the database's settings when they start
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (dbname,))

        admin.execute(f'ALTER DATABASE "{dbname}" SET default_transaction_read_only = on')
        reconnect_everyone()
        try:
            yield
        finally:
            admin.execute(f'ALTER DATABASE "{dbname}" RESET default_transaction_read_only')
            reconnect_everyone()


def _read_while_the_database_goes(
    stream: openai.Stream, received: list[str], outage: ExitStack, gateway: Gateway
) -> None:
    """Read ``stream`` into ``received``; once the hold is placed and text is flowing (three chunks in),
    the database turns read-only until ``outage`` ends."""
    for chunk in stream:
        received.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
        if len(received) == 3:
            outage.enter_context(database_read_only(gateway))


def test_a_stream_delivered_while_the_ledger_was_down_is_charged_once_it_is_back(
    tmp_path: Path, fake_upstream: FakeUpstream
):
    gateway = Gateway(write_config(tmp_path, fake_upstream.base_url, database=new_postgres_database_url())).start()
    try:
        teams = Teams(gateway.config)
        team = teams.open("100")
        teams.close()
        with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
            stream = client.chat.completions.create(
                model="fake-gpt", messages=[{"role": "user", "content": f"{WORDS} [[chunk-delay:100]]"}], stream=True
            )
            received: list[str] = []
            with ExitStack() as outage:
                with pytest.raises(openai.APIError) as told:
                    _read_while_the_database_goes(stream, received, outage, gateway)
                assert "charged once it can be written again" in str(told.value)
            assert "".join(received) == f"Echo: {WORDS}"  # the whole answer reached the client

            wait_for(lambda: plain_http.get(gateway.root_url + "/health/ready").status_code == 200)
            deadline = time.monotonic() + 15
            while not (
                charges := [
                    row
                    for row in csv.DictReader(io.StringIO(gateway.cli("ledger", "export", "--team", team.name).stdout))
                    if row["kind"] == "charge"
                ]
            ):
                assert time.monotonic() < deadline, "the owed charge was never made"
                time.sleep(0.2)
            (charge,) = charges
            assert int(charge["output_tokens"]) == 21  # "Echo:" and the 20 words, as the fake counts them
            gateway.wait_until_nothing_held(team.name)
            assert gateway.cli("ledger", "verify", check=False).returncode == 0
            owed = [
                line
                for line in gateway.log_lines()
                if line.get("logger") == "tollgate.access" and line.get("error", "") and "owed" in line["error"]
            ]
            assert len(owed) == 1
    finally:
        gateway.stop()
