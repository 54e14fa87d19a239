"""The README's quick start: `tollgate demo` opens a team, prints a key, and serves the demo model."""

from __future__ import annotations

import base64
import io
import shutil
import subprocess
import time
import wave
from decimal import Decimal
from pathlib import Path

import openai

from tests.support.children import end_server, start_server
from tests.support.gateway import free_port, tollgate_command


def _wav(seconds: float) -> bytes:
    """A mono 16-bit WAV file of ``seconds`` of silence at 8 kHz."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x00" * int(seconds * 8000))
    return buffer.getvalue()


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "demo.toml"


def test_the_demo_prints_a_working_key_and_a_curl_line(tmp_path):
    config = tmp_path / "demo.toml"
    shutil.copy(EXAMPLE, config)
    port = free_port()
    process = start_server(
        [*tollgate_command(), "demo", "--config", str(config), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            lines.append(line)
            if line.startswith("Tollgate: serving"):
                break
        output = "".join(lines)
        key = next(said.split(": ", 1)[1].strip() for said in lines if said.startswith("API key (shown once)"))
        assert f"curl -s http://127.0.0.1:{port}/v1/chat/completions" in output
        assert key in output

        with openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, max_retries=3) as client:
            completion = client.chat.completions.create(
                model="demo-gpt", messages=[{"role": "user", "content": "Hello, Tollgate!"}]
            )
            assert (
                completion.choices[0].message.content
                == "Hello from the Tollgate demo model. You said: Hello, Tollgate!"
            )
            assert completion.usage.completion_tokens == 10
            assert Decimal(str(completion.usage.model_extra["remaining"]["credits"])) < 100

            chunks = list(
                client.chat.completions.create(
                    model="demo-gpt",
                    messages=[{"role": "user", "content": "stream please"}],
                    stream=True,
                    stream_options={"include_usage": True},
                )
            )
            assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).endswith("stream please")
            assert "cost" in chunks[-1].usage.model_extra

            # The demo image model: one 1024x1024 standard image (the defaults) at 0.04 USD, 4 credits.
            image = client.images.generate(model="demo-image", prompt="a lighthouse", response_format="b64_json")
            assert image.data is not None
            assert base64.b64decode(image.data[0].b64_json or "").startswith(b"\x89PNG\r\n\x1a\n")
            assert image.to_dict()["usage"]["cost"]["credits"] == 4

            # The demo embeddings and transcription models, each answer carrying its charge.
            vectors = client.embeddings.create(model="demo-embedding", input=["one", "two"])
            assert len(vectors.data) == 2
            assert Decimal(str(vectors.to_dict()["usage"]["cost"]["credits"])) > 0
            transcript = client.audio.transcriptions.create(model="demo-whisper", file=("hello.wav", _wav(2.0)))
            assert Decimal(str(transcript.to_dict()["usage"]["cost"]["credits"])) == Decimal(
                "0.02"
            )  # 2 s at 0.0001 USD
    finally:
        end_server(process)
    assert (tmp_path / "demo.db").exists()
