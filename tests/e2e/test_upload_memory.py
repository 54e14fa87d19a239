"""A 25 MB transcription upload is relayed without the gateway holding it: its peak resident set
while it reads, spools and re-sends the file stays within a few MB of what it was idle.

How it is measured: the gateway process (``tollgate serve``, one process) serves a small
transcription first, so everything an upload touches is loaded; its peak resident set is then reset
to its current one (``/proc/PID/clear_refs`` ← 5, Linux 4.0+) and read (``VmRSS``: idle), the 25 MB
WAV is transcribed through the official SDK (the gateway reads it from the socket in chunks, spools
it to a temporary file, reads the duration from its header, and re-sends it to the fake upstream a
64 KiB chunk at a time), and the peak (``VmHWM``) read again. Holding the file once would add 25 MB.
"""

from __future__ import annotations

import io
import wave
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.e2e.test_audio import audio_config
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway
from tests.support.teams import Teams

#: OpenAI's limit is 25 MB; a 16-bit mono WAV at 8 kHz is 16,000 bytes a second.
UPLOAD_BYTES = 25_000_000
#: What the peak may exceed the idle resident set by: buffers of 64 KiB chunks, the 1 MiB in-memory
#: spool, the allocator's slack; far below the 25 MB of the file.
ALLOWED_GROWTH_KB = 6 * 1024


def _wav(size: int) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\1\0" * ((size - 44) // 2))
    return buffer.getvalue()


def _status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    config = audio_config(tmp_path_factory.mktemp("upload-memory"), fake_upstream.base_url)
    config.write_text(config.read_text().replace("max_upload_bytes = 2000000\n", ""))
    started = Gateway(config).start()
    yield started
    started.stop()


def test_a_25_mb_upload_keeps_the_gateways_memory_flat(gateway: Gateway, capsys: pytest.CaptureFixture[str]):
    assert gateway.process is not None
    pid = gateway.process.pid
    teams = Teams(gateway.config)
    try:
        team = teams.open("100")
    finally:
        teams.close()
    audio = _wav(UPLOAD_BYTES)
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0, timeout=120) as sdk:
        sdk.audio.transcriptions.create(model="whisper", file=("warm.wav", _wav(200_000), "audio/wav"))
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        idle = _status_kb(pid, "VmRSS")
        answer = sdk.audio.transcriptions.create(model="whisper", file=("big.wav", audio, "audio/wav"))
        peak = _status_kb(pid, "VmHWM")
    seconds = -(-(UPLOAD_BYTES - 44) // 16_000)
    assert answer.text == f"Transcribed {seconds} seconds of big.wav."
    with capsys.disabled():
        print(
            f"\n25 MB upload: gateway RSS idle {idle / 1024:.1f} MB, peak {peak / 1024:.1f} MB, "
            f"+{(peak - idle) / 1024:.1f} MB"
        )
    assert peak - idle < ALLOWED_GROWTH_KB, f"idle {idle} kB, peak {peak} kB"
