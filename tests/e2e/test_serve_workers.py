"""``tollgate serve --workers N``: N gateway processes behind one port, each with its own runtime,
sharing the ledger (and, through Redis, the rate limits); SIGTERM stops them all."""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import signal
import subprocess
import time
from decimal import Decimal
from pathlib import Path

import httpx
import openai
from prometheus_client.parser import text_string_to_metric_families

from tests.support import plain_http
from tests.support.backend import RawDatabase
from tests.support.children import forget_server, start_server
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, GATEWAY_ENV, free_port, run_cli, tollgate_command, write_config


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _workers(pid: int) -> list[int]:
    """The worker processes ``tollgate serve --workers`` (process ``pid``) spawned."""
    return [child for child in _children(pid) if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()]


def _alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if Path(f"/proc/{pid}").exists()]


def _serve(config: Path, port: int, *extra: str) -> subprocess.Popen[str]:
    return start_server(
        [*tollgate_command(), "serve", "--config", str(config), "--port", str(port), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **GATEWAY_ENV},
    )


def _wait_ready(process: subprocess.Popen[str], port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        try:
            if plain_http.get(f"http://127.0.0.1:{port}/v1/models", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("tollgate serve --workers 2 did not become ready within 60 s")


async def test_two_workers_serve_one_port_and_charge_every_request_once(tmp_path, fake_upstream: FakeUpstream):
    config = write_config(tmp_path, fake_upstream.base_url, redis=True)
    run_cli(config, "team", "create", "acme", "--credits", "50")
    key = run_cli(config, "key", "create", "--team", "acme", "--rpm", "100000").stdout.splitlines()[-1]
    port = free_port()
    process = _serve(config, port, "--workers", "2")
    try:
        await asyncio.to_thread(_wait_ready, process, port)
        workers = await asyncio.to_thread(_workers, process.pid)
        assert len(workers) == 2
        # Each worker built its own runtime: two gateway processes registered on the ledger.
        deadline = time.monotonic() + 10
        while (live := RawDatabase.of_config(config).execute("SELECT pid FROM gateway_instances")) and len(live) < 2:
            assert time.monotonic() < deadline, live
            await asyncio.sleep(0.2)
        registered = {row[0] for row in live}
        assert len(registered) == 2, (registered, workers)
        assert registered <= set(workers), (registered, workers)

        async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, max_retries=0) as client:
            answers = await asyncio.gather(
                *(
                    client.chat.completions.create(
                        model="fake-gpt", max_tokens=10, messages=[{"role": "user", "content": f"request {i}"}]
                    )
                    for i in range(60)
                )
            )
            await client.close()
            assert len(fake_upstream.requests) == 60
            charged = sum(Decimal(str(a.usage.model_extra["cost"]["credits"])) for a in answers)
            # Whichever worker answers the scrape, it counts both workers' requests and tokens.
            for _ in range(4):
                async with plain_http.AsyncClient() as http:  # a new connection each time, to whichever worker takes it
                    scraped = await http.get(
                        f"http://127.0.0.1:{port}/metrics", headers={"authorization": f"Bearer {ADMIN_KEY}"}
                    )
                samples = {
                    (s.name, tuple(sorted(s.labels.items()))): s.value
                    for family in text_string_to_metric_families(scraped.text)
                    for s in family.samples
                }
                assert (
                    samples[
                        (
                            "tollgate_requests_total",
                            (("endpoint", "chat.completions"), ("model", "fake-gpt"), ("status", "200")),
                        )
                    ]
                    == 60
                )
                assert samples[("tollgate_tokens_total", (("kind", "output"), ("model", "fake-gpt")))] == sum(
                    a.usage.completion_tokens for a in answers
                )
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    outlived = await asyncio.to_thread(_alive, workers)
    forget_server(process)
    assert process.returncode == 0, output
    assert not outlived, "a worker outlived SIGTERM"
    shown = run_cli(config, "team", "show", "acme").stdout
    assert Decimal(shown.split("balance ")[1].split(" ")[0]) == Decimal(50) - charged, shown
    assert "held 0," in shown, shown  # both workers gave their credit leases back as they stopped
    verify = run_cli(config, "ledger", "verify")
    assert "60 charges" in verify.stdout


def test_several_workers_without_redis_url_are_refused_at_once(tmp_path, fake_upstream: FakeUpstream):
    config = write_config(tmp_path, fake_upstream.base_url)
    result = subprocess.run(
        [*tollgate_command(), "serve", "--config", str(config), "--port", str(free_port()), "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**{k: v for k, v in os.environ.items() if k != "TOLLGATE_REDIS_URL"}, **GATEWAY_ENV},
    )
    assert result.returncode == 2
    assert "--workers 2" in result.stderr
    assert "redis_url" in result.stderr
    assert "Traceback" not in result.stderr


def test_verify_runs_one_replay_at_a_time_across_workers(tmp_path, fake_upstream: FakeUpstream):
    """Issue #27, finding 11: ``GET /admin/ledger/verify`` shared one run among the callers of one
    gateway process, but each ``--workers`` process ran its own, at the same time. Now a run replays
    only while it holds the ledger's verify lock: callers reaching both workers get runs (each report
    saying when its replay started and finished) that never overlap."""
    import threading

    config = write_config(tmp_path, fake_upstream.base_url, redis=True)
    run_cli(config, "team", "create", "acme", "--credits", "50")
    port = free_port()
    process = _serve(config, port, "--workers", "2")
    answers: list[dict[str, object]] = []

    def ask() -> None:
        for _ in range(3):  # a new connection each time, to whichever worker takes it: both are asked
            with plain_http.Client(headers={"authorization": f"Bearer {ADMIN_KEY}"}, timeout=120) as own:
                answers.append(own.get(f"http://127.0.0.1:{port}/admin/ledger/verify").json())

    try:
        _wait_ready(process, port)
        callers = [threading.Thread(target=ask) for _ in range(8)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join()
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    forget_server(process)
    assert len(answers) == 24, output
    assert all(a["ok"] for a in answers), answers
    runs = sorted({(str(a["started_at"]), str(a["finished_at"])) for a in answers})
    assert len(runs) >= 2, (runs, output)  # both workers were asked, each ran (callers of one share its run)
    for (_, finished), (started, _) in itertools.pairwise(runs):
        assert started >= finished, runs  # the next replay began after the one before it had ended
    assert len(re.findall(r"ledger verify run \d+: replayed from", output)) == len(runs), output
