"""The built-in ``demo`` upstream: answers locally, so the quick start needs no network or key.

It is a real model as far as billing is concerned: it counts prompt and completion tokens with one
deterministic tokenizer (a word and the whitespace after it is one token) and reports them as an
OpenAI-compatible provider would, so costs and balances behave exactly as with a real upstream.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from app.errors import UpstreamFailure
from app.upstream import demo_audio
from app.upstream.base import Answer, StreamEvent
from app.upstream.demo_embeddings import embeddings_answer
from app.upstream.demo_images import demo_images_answer
from app.upstream.demo_words import demo_tokens
from app.upstream.media import ByteStream, RawAnswer, Upload

#: The demo's other endpoints: the path under ``/v1`` → the answer to a request's body.
_ENDPOINTS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "/embeddings": embeddings_answer,
    "/images/generations": demo_images_answer,
}
_GREETING = "Hello from the Tollgate demo model. You said: "


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


class _DemoStream:
    def __init__(self, chunks: list[dict[str, Any]]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[list[StreamEvent]]:
        for chunk in self._chunks:  # one at a time, as a provider generating word by word sends them
            await asyncio.sleep(0)
            yield [StreamEvent.of(chunk)]

    def close(self) -> None:
        self._chunks = []


class DemoUpstream:
    """Speaks the chat wire, in process."""

    wire = "chat"

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        pieces, finish, usage = self._answer(body)
        return Answer.of(
            {
                "id": "chatcmpl-" + secrets.token_hex(12),
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "".join(pieces), "refusal": None},
                        "logprobs": None,
                        "finish_reason": finish,
                    }
                ],
                "usage": usage,
            }
        )

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> _DemoStream:
        pieces, finish, usage = self._answer(body)
        base = {
            "id": "chatcmpl-" + secrets.token_hex(12),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body["model"],
        }

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}

        chunks = [chunk({"role": "assistant", "content": ""})]
        chunks += [chunk({"content": piece}) for piece in pieces]
        chunks.append(chunk({}, finish))
        chunks.append({**base, "choices": [], "usage": usage})
        return _DemoStream(chunks)

    async def post(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        """Another of OpenAI's endpoints, answered in process (``/embeddings``, ``/images/generations``)."""
        answer = _ENDPOINTS.get(path)
        if answer is None:
            raise UpstreamFailure(f"The demo upstream does not serve {path}.")
        return Answer.of(answer(body))

    async def post_upload(self, path: str, upload: Upload, headers: dict[str, str] | None = None) -> RawAnswer:
        """A transcription or translation, answered in process (``app/upstream/demo_audio.py``)."""
        if path not in ("/audio/transcriptions", "/audio/translations"):
            raise UpstreamFailure(f"The demo upstream does not serve {path}.")
        return await demo_audio.transcription(path, upload)

    async def open_bytes(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> ByteStream:
        """Speech, answered in process as a WAV of silence streamed in chunks."""
        if path != "/audio/speech":
            raise UpstreamFailure(f"The demo upstream does not serve {path}.")
        return demo_audio.DemoSpeech(body)

    async def open_upload(self, path: str, upload: Upload, headers: dict[str, str] | None = None) -> ByteStream:
        """A transcription asked as a stream: the demo, like whisper-1, answers it whole."""
        return demo_audio.WholeAnswer(await self.post_upload(path, upload, headers))

    async def aclose(self) -> None:
        return None

    @staticmethod
    def _answer(body: dict[str, Any]) -> tuple[list[str], str, dict[str, Any]]:
        messages = body.get("messages") or []
        prompt_tokens = sum(len(demo_tokens(_text_of(m.get("content")))) + 3 for m in messages if isinstance(m, dict))
        last_user = next(
            (_text_of(m.get("content")) for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"),
            "",
        )
        pieces = demo_tokens(_GREETING + (last_user.strip() or "nothing"))
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        finish = "stop"
        if isinstance(limit, int) and 0 < limit < len(pieces):
            pieces, finish = pieces[:limit], "length"
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(pieces),
            "total_tokens": prompt_tokens + len(pieces),
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        }
        return pieces, finish, usage
