"""A 100 MB batch output file is relayed without the gateway holding it: its peak resident set while
it streams ``GET /v1/files/{id}/content`` from the upstream to the client stays within a few MB of
what it was idle.

How it is measured, as the 25 MB upload is (``test_upload_memory.py``): one gateway process; a batch
of 100 requests whose output lines the fake upstream pads to 1 MB each (``output_line_bytes``: the
fake makes the file as it is read, never whole in its memory either); the batch settles (its output
read once, line by line, and charged); the file is read through the official SDK once to warm
every path, then the process's peak resident set is reset (``/proc/PID/clear_refs`` ← 5), its idle
resident set read, the 100 MB read again a chunk at a time (the test keeps none of it), and the peak
(``VmHWM``) read. Holding the file once would add 100 MB.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.e2e.test_batches import BATCH_MODEL, hand_cost, line, line_charges, upload, wait_for
from tests.e2e.test_upload_memory import _status_kb
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.teams import Teams

LINES = 100
LINE_BYTES = 1_000_000
#: Chunks of the relay in flight, the allocator's slack: far below the 100 MB of the file.
ALLOWED_GROWTH_KB = 6 * 1024


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(api_key="upstream-secret") as fake:
        yield fake


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, upstream: FakeUpstream) -> Iterator[Gateway]:
    config = write_config(
        tmp_path_factory.mktemp("output-memory"),
        upstream.base_url,
        settings=BATCH_MODEL.format(base=upstream.base_url, root=upstream.anthropic_base_url),
    )
    started = Gateway(config).start()
    yield started
    started.stop()


def _read_through(client: openai.OpenAI, file_id: str) -> int:
    """The file's bytes read through the SDK a megabyte at a time, none kept; how many."""
    size = 0
    with client.files.with_streaming_response.content(file_id) as response:
        for chunk in response.iter_bytes(1 << 20):
            size += len(chunk)
    return size


def test_a_100_mb_output_file_keeps_the_gateways_memory_flat(
    gateway: Gateway, upstream: FakeUpstream, capsys: pytest.CaptureFixture[str]
):
    assert gateway.process is not None
    pid = gateway.process.pid
    teams = Teams(gateway.config)
    try:
        team = teams.open("1000")
    finally:
        teams.close()
    upstream.batches.output_line_bytes = LINE_BYTES
    try:
        with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0, timeout=300) as sdk:
            batch = sdk.batches.create(
                input_file_id=upload(sdk, [line(f"l{i}", 2) for i in range(LINES)]),
                endpoint="/v1/chat/completions",
                completion_window="24h",
            )
            done = wait_for(sdk, batch.id, "completed", within=240)
            assert done.output_file_id is not None
            assert _read_through(sdk, done.output_file_id) == LINES * (LINE_BYTES + 1)  # warm
            Path(f"/proc/{pid}/clear_refs").write_text("5")
            idle = _status_kb(pid, "VmRSS")
            relayed = _read_through(sdk, done.output_file_id)
            peak = _status_kb(pid, "VmHWM")
    finally:
        upstream.batches.output_line_bytes = 0
    assert relayed == LINES * (LINE_BYTES + 1)
    charged = line_charges(gateway, team, batch.id)  # the padded lines were charged from their usage
    assert charged == {f"l{i}": hand_cost(2) for i in range(LINES)}
    with capsys.disabled():
        print(
            f"\n100 MB output file: gateway RSS idle {idle / 1024:.1f} MB, peak {peak / 1024:.1f} MB, "
            f"+{(peak - idle) / 1024:.1f} MB"
        )
    assert peak - idle < ALLOWED_GROWTH_KB, f"idle {idle} kB, peak {peak} kB"
