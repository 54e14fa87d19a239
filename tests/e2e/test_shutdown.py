"""Graceful shutdown, the way an orchestrator does it: SIGTERM while a client is streaming.

The gateway must stop taking connections at once, let the stream finish (up to
``shutdown_timeout``), settle its charge, give its credit lease back, flush the ledger and exit 0;
a stream still running at the deadline is cut off and charged for exactly what it delivered.
"""

from __future__ import annotations

import csv
import io
import signal
import subprocess
import time
from decimal import Decimal
from pathlib import Path

import httpx
import openai
import pytest

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.teams import Teams

WORDS = " ".join(f"word{i}" for i in range(30))


def _gateway(tmp_path: Path, fake_upstream: FakeUpstream, shutdown_timeout: float) -> tuple[Gateway, str, str]:
    gateway = Gateway(
        write_config(tmp_path, fake_upstream.base_url, settings=f"shutdown_timeout = {shutdown_timeout}")
    ).start()
    teams = Teams(gateway.config)
    team = teams.open("100")
    teams.close()
    return gateway, team.name, team.key


def _charges(gateway: Gateway, team: str) -> list[dict[str, str]]:
    """The team's charges in its audit history (amounts in micro-credits)."""
    exported = gateway.cli("ledger", "export", "--team", team).stdout
    return [row for row in csv.DictReader(io.StringIO(exported)) if row["kind"] == "charge"]


def _balance_line(gateway: Gateway, team: str) -> str:
    return gateway.cli("team", "show", team).stdout


def test_sigterm_during_a_stream_lets_it_finish_and_settles_its_charge(tmp_path: Path, fake_upstream: FakeUpstream):
    gateway, team, key = _gateway(tmp_path, fake_upstream, shutdown_timeout=30)
    process = gateway.process
    assert process is not None
    with openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0) as client:
        stream = client.chat.completions.create(
            model="fake-gpt",
            messages=[{"role": "user", "content": f"{WORDS} [[chunk-delay:60]]"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks, refused_meanwhile = [], None
        for chunk in stream:
            chunks.append(chunk)
            if len(chunks) == 2:
                process.send_signal(signal.SIGTERM)
                time.sleep(0.3)
                try:
                    plain_http.get(gateway.base_url + "/models", timeout=2)
                    refused_meanwhile = False
                except httpx.ConnectError:
                    refused_meanwhile = True
        assert refused_meanwhile, "the gateway still accepted connections after SIGTERM"
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == f"Echo: {WORDS}"  # the whole answer, after the signal
        usage = chunks[-1].usage
        cost = Decimal(str(usage.model_extra["cost"]["credits"]))
        assert cost > 0

        assert process.wait(timeout=30) == 0
        gateway.process = None
        (charge,) = _charges(gateway, team)
        assert Decimal(charge["amount"]) == -cost * 1_000_000
        assert int(charge["output_tokens"]) == usage.completion_tokens
        shown = _balance_line(gateway, team)
        assert "held 0," in shown  # the lease went back before the process exited
        assert f"balance {Decimal(100) - cost}" in shown.replace(",", "")
        assert gateway.cli("ledger", "verify", check=False).returncode == 0
        assert "stopped: every request settled, leases returned, the ledger flushed" in gateway.output()


def _read_and_stop_the_gateway_midway(
    stream: openai.Stream, received: list[str], process: subprocess.Popen, signalled: list[float]
) -> None:
    """Read ``stream`` into ``received``; once two chunks are in, send the gateway SIGTERM (and note
    when in ``signalled``)."""
    for chunk in stream:
        received.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
        if len(received) == 2:
            process.send_signal(signal.SIGTERM)
            signalled.append(time.monotonic())


def test_a_stream_still_running_at_the_deadline_is_cut_and_charged_for_what_it_delivered(
    tmp_path: Path, fake_upstream: FakeUpstream
):
    gateway, team, key = _gateway(tmp_path, fake_upstream, shutdown_timeout=1)
    process = gateway.process
    assert process is not None
    with openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0) as client:
        stream = client.chat.completions.create(
            model="fake-gpt", messages=[{"role": "user", "content": f"{WORDS} [[chunk-delay:400]]"}], stream=True
        )
        received: list[str] = []
        signalled: list[float] = []
        with pytest.raises((openai.APIError, httpx.HTTPError)):  # the connection is cut at the deadline
            _read_and_stop_the_gateway_midway(stream, received, process, signalled)
        assert process.wait(timeout=30) == 0
        assert time.monotonic() - signalled[0] < 8  # bounded: 1 s for the stream, then settle and flush
        gateway.process = None
        text = "".join(received)
        assert 0 < len(text) < len(f"Echo: {WORDS}")
        (charge,) = _charges(gateway, team)
        assert 0 < int(charge["output_tokens"]) < 32  # what it delivered, not the whole answer
        assert "held 0," in _balance_line(gateway, team)
        assert gateway.cli("ledger", "verify", check=False).returncode == 0
