"""The fake upstream's OpenAI Files and Batch APIs, on the wire as OpenAI speaks them.

``POST /v1/files`` (multipart: ``purpose``, ``file``), ``GET /v1/files/{id}`` and ``/content``,
``POST /v1/batches``, ``GET /v1/batches/{id}``, ``GET /v1/batches``, ``POST /v1/batches/{id}/cancel``.
A batch goes ``validating`` → ``in_progress`` → ``completed`` on its own after
:attr:`BatchState.delay` seconds, or — with :attr:`BatchState.held` — once the test calls
:meth:`BatchState.release`. Its output file has one line per request that succeeded, its body the
chat completion (or the embeddings, in a batch of ``/v1/embeddings``) the fake would have answered
alone (the same usage: prompt tokens by the fake's whitespace count), and its error file one per
request that failed (``[[fail:CODE]]``). A cancelled batch completed the first
:attr:`BatchState.done_before_cancel` of its requests; with :attr:`BatchState.expires_with` set, a
batch ends ``expired`` instead of ``completed``, having completed that many. As OpenAI's do, the
requests a cancelled or expired batch never ran are lines of its error file (``batch_cancelled``,
``batch_expired``). With :attr:`BatchState.output_line_bytes`, each output line is padded to that
size (``system_fingerprint``) and the output file is made as it is read, never whole in memory.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
import multipart

from tests.support.fake_embeddings import DEFAULT_DIMENSIONS, _inputs, prompt_tokens, vector
from tests.support.fake_upstream import (
    Send,
    _chat_answer,
    _echoed,
    _parse_directives,
    _Reject,
    _send_json,
    _validate_chat,
    error_body,
    openai_request,
)


@dataclass
class _File:
    id: str
    filename: str
    purpose: str
    content: bytes
    created_at: int = field(default_factory=lambda: int(time.time()))
    #: A file made as it is read (its ``size`` bytes, in chunks), instead of ``content``.
    generate: Callable[[], Iterator[bytes]] | None = None
    size: int = 0

    def body(self) -> bytes | Iterator[bytes]:
        return self.generate() if self.generate is not None else self.content

    def as_object(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": self.size if self.generate is not None else len(self.content),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "status_details": None,
        }


@dataclass
class _Batch:
    id: str
    input_file_id: str
    endpoint: str
    metadata: dict[str, str] | None
    created_at: int
    status: str = "validating"
    output_file_id: str | None = None
    error_file_id: str | None = None
    times: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: {"total": 0, "completed": 0, "failed": 0})
    cancelled: bool = False

    def as_object(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "errors": None,
            "input_file_id": self.input_file_id,
            "completion_window": "24h",
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at,
            "in_progress_at": self.times.get("in_progress_at"),
            "expires_at": self.created_at + 86400,
            "finalizing_at": self.times.get("finalizing_at"),
            "completed_at": self.times.get("completed_at"),
            "failed_at": None,
            "expired_at": self.times.get("expired_at"),
            "cancelling_at": self.times.get("cancelling_at"),
            "cancelled_at": self.times.get("cancelled_at"),
            "request_counts": dict(self.counts),
            "metadata": self.metadata,
        }


class BatchState:
    """The fake's files and batches, and how its batches end."""

    def __init__(self) -> None:
        self.files: dict[str, _File] = {}
        self.batches: dict[str, _Batch] = {}
        #: Seconds after its creation a batch completes on its own (unless ``held``).
        self.delay = 0.3
        #: Batches wait for :meth:`release` instead of completing after ``delay``.
        self.held = False
        #: How many of its requests a cancelled batch completed.
        self.done_before_cancel = 1
        #: A batch that may end expires instead, having completed this many of its requests.
        self.expires_with: int | None = None
        #: Seconds the fake takes to create a batch (``POST /v1/batches``), as a real upstream may.
        self.create_seconds = 0.0
        #: Pad each output line to this many bytes, the output file made as it is read (0: no padding).
        self.output_line_bytes = 0
        self._released = threading.Event()
        self._lock = threading.Lock()
        #: Anthropic's message batches (``tests/support/fake_message_batches.py``).
        self.message_batches: dict[str, Any] = {}

    def batch_may_end(self, created: float) -> bool:
        """Whether a batch created at ``created`` (Unix time) has ended by now."""
        return self._released.is_set() if self.held else time.time() >= created + self.delay

    async def handle_messages(
        self, api_key: str | None, method: str, path: str, raw: bytes, headers: dict[str, str], send: Send
    ) -> None:
        """Anthropic's message batches, under ``/v1/messages/batches``."""
        from tests.support.fake_message_batches import route

        bearer = headers.get("authorization") == f"Bearer {api_key}"  # anthropic 2.x SDKs send the key so
        if api_key is not None and headers.get("x-api-key") != api_key and not bearer:
            raise _Reject(
                401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
            )
        parts = [p for p in path.removeprefix("/v1/messages/batches").split("/") if p]
        root = f"http://{headers.get('host', '127.0.0.1')}"
        with self._lock:
            answer = route(self, method, parts, raw, root)
        if isinstance(answer, bytes):
            await _send_file(send, answer, b"application/binary")
            return
        await _send_json(send, 200, answer)

    def release(self) -> None:
        """Let every held batch (and every later one) complete."""
        self._released.set()

    def hold(self) -> None:
        self.held = True
        self._released.clear()

    async def handle(
        self, api_key: str | None, method: str, path: str, raw: bytes, headers: dict[str, str], send: Send
    ) -> None:
        if api_key is not None and headers.get("authorization") != f"Bearer {api_key}":
            raise _Reject(401, error_body("Incorrect API key provided", "invalid_request_error", "invalid_api_key"))
        parts = path.strip("/").split("/")[1:]  # after "v1"
        if parts == ["batches"] and method == "POST":
            await asyncio.sleep(self.create_seconds)
        with self._lock:
            answer = self._route(method, parts, raw, headers)
        if not isinstance(answer, dict):
            await _send_file(send, answer, b"application/octet-stream")
            return
        await _send_json(send, 200, answer)

    def _route(
        self, method: str, parts: list[str], raw: bytes, headers: dict[str, str]
    ) -> dict[str, Any] | bytes | Iterator[bytes]:
        if parts == ["files"] and method == "POST":
            return self._upload(raw, headers)
        if parts == ["files"] and method == "GET":
            return {"object": "list", "data": [f.as_object() for f in self.files.values()], "has_more": False}
        if len(parts) >= 2 and parts[0] == "files" and method == "GET":
            found = self.files.get(parts[1])
            if found is None:
                raise _Reject(404, error_body(f"No such File object: {parts[1]}", "invalid_request_error"))
            return found.body() if parts[2:] == ["content"] else found.as_object()
        if parts == ["batches"] and method == "POST":
            return self._create(openai_request(None, raw, headers))
        if parts == ["batches"] and method == "GET":
            return {
                "object": "list",
                "data": [self._advance(b).as_object() for b in self.batches.values()],
                "has_more": False,
            }
        if len(parts) >= 2 and parts[0] == "batches":
            batch = self.batches.get(parts[1])
            if batch is None:
                raise _Reject(404, error_body(f"No batch found with id '{parts[1]}'.", "invalid_request_error"))
            if parts[2:] == ["cancel"] and method == "POST":
                batch.cancelled = True
                batch.status = "cancelling"
                batch.times["cancelling_at"] = int(time.time())
                return batch.as_object()
            return self._advance(batch).as_object()
        raise _Reject(404, error_body("Unknown path", "invalid_request_error"))

    def _upload(self, raw: bytes, headers: dict[str, str]) -> dict[str, Any]:
        _, options = multipart.parse_options_header(headers.get("content-type", ""))
        parser = multipart.PushMultipartParser(options.get("boundary", ""))
        fields: dict[str, bytes] = {}
        filename, name = "", ""
        for event in parser.parse(raw):
            if isinstance(event, multipart.MultipartSegment):
                name, filename = event.name, event.filename or filename
                fields[name] = b""
            elif event is not None:
                fields[name] += event
        parser.close()
        if fields.get("purpose") != b"batch" or "file" not in fields:
            raise _Reject(
                400, error_body("Invalid file upload: 'purpose' batch and 'file' are required", "invalid_request_error")
            )
        made = _File(f"file-{secrets.token_hex(12)}", filename, "batch", fields["file"])
        self.files[made.id] = made
        return made.as_object()

    def _create(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict) or body.get("input_file_id") not in self.files:
            raise _Reject(400, error_body("Invalid 'input_file_id'", "invalid_request_error"))
        lines = [ln for ln in self.files[body["input_file_id"]].content.splitlines() if ln.strip()]
        batch = _Batch(
            f"batch_{secrets.token_hex(12)}",
            body["input_file_id"],
            body["endpoint"],
            body.get("metadata"),
            int(time.time()),
        )
        batch.counts["total"] = len(lines)
        self.batches[batch.id] = batch
        return batch.as_object()

    def _advance(self, batch: _Batch) -> _Batch:
        """Move the batch along: in progress at once, completed after the delay (or the release), or
        cancelled with what it had completed."""
        if batch.status in ("completed", "cancelled", "expired"):
            return batch
        now = int(time.time())
        batch.times.setdefault("in_progress_at", now)
        if batch.cancelled:
            self._finish(batch, "cancelled", self.done_before_cancel)
        elif (self._released.is_set() if self.held else time.time() >= batch.created_at + self.delay) and (
            self.expires_with is not None
        ):
            self._finish(batch, "expired", self.expires_with)
        elif self._released.is_set() if self.held else time.time() >= batch.created_at + self.delay:
            self._finish(batch, "completed", None)
        elif batch.status == "validating":
            batch.status = "in_progress"
        return batch

    def _finish(self, batch: _Batch, status: str, done: int | None) -> None:
        lines = [msgspec.json.decode(ln) for ln in self.files[batch.input_file_id].content.splitlines() if ln.strip()]
        ran = lines if done is None else lines[:done]
        output, errors = [], []
        for line in ran:
            ok, out = _answer(line)
            (output if ok else errors).append(msgspec.json.encode(out))
        errors += [msgspec.json.encode(_not_run(line, status)) for line in lines[len(ran) :]]
        now = int(time.time())
        batch.times.update({"finalizing_at": now, f"{status}_at": now})
        batch.status = status
        batch.counts.update({"completed": len(output), "failed": len(errors)})
        if output:
            batch.output_file_id = self._keep_output(output, "batch_output.jsonl")
        if errors:
            batch.error_file_id = self._keep_output(errors, "batch_errors.jsonl")

    def _keep_output(self, lines: list[bytes], name: str) -> str:
        """An output file of ``lines``; padded ones are made as read (only their inputs are kept)."""
        made = _File(f"file-{secrets.token_hex(12)}", name, "batch_output", b"\n".join(lines) + b"\n")
        size = self.output_line_bytes
        if size and name == "batch_output.jsonl":
            made.content, made.size = b"", len(lines) * (size + 1)
            made.generate = lambda: (_padded(line, size) + b"\n" for line in lines)
        self.files[made.id] = made
        return made.id


def _padded(line: bytes, size: int) -> bytes:
    """An output line made ``size`` bytes long by its answer's ``system_fingerprint``."""
    out = msgspec.json.decode(line)
    out["response"]["body"]["system_fingerprint"] = ""
    short = len(msgspec.json.encode(out))
    out["response"]["body"]["system_fingerprint"] = "fp_" + "0" * (size - short - 3)
    return msgspec.json.encode(out)


def _not_run(line: dict[str, Any], status: str) -> dict[str, Any]:
    """The error-file line of a request a cancelled or expired batch never ran, as OpenAI writes it."""
    code, words = (
        ("batch_expired", "This request could not be executed before the completion window expired.")
        if status == "expired"
        else ("batch_cancelled", "This request was not executed because the batch was cancelled.")
    )
    return {
        "id": f"batch_req_{secrets.token_hex(8)}",
        "custom_id": line["custom_id"],
        "response": None,
        "error": {"code": code, "message": words},
    }


async def _send_file(send: Send, body: bytes | Iterator[bytes], content_type: bytes) -> None:
    """A file's bytes, or its chunks as they are made."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", content_type)]})
    if isinstance(body, bytes):
        await send({"type": "http.response.body", "body": body})
        return
    for chunk in body:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


def _embedded(line: dict[str, Any]) -> dict[str, Any]:
    """An embeddings line's output line: the embeddings (floats) and usage the fake answers alone."""
    req = line["body"]
    items = _inputs(req["input"])
    dimensions = req.get("dimensions", DEFAULT_DIMENSIONS)
    data = [{"object": "embedding", "index": i, "embedding": vector(item, dimensions)} for i, item in enumerate(items)]
    count = prompt_tokens(items)
    body = {
        "object": "list",
        "data": data,
        "model": req["model"],
        "usage": {"prompt_tokens": count, "total_tokens": count},
    }
    return {
        "id": f"batch_req_{secrets.token_hex(8)}",
        "custom_id": line["custom_id"],
        "response": {"status_code": 200, "request_id": secrets.token_hex(8), "body": body},
        "error": None,
    }


def _answer(line: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """One input line's output line: the chat completion the fake answers it with, or its error."""
    if line.get("url") == "/v1/embeddings":
        return True, _embedded(line)
    req = line["body"]
    messages = req["messages"]
    head = {"id": f"batch_req_{secrets.token_hex(8)}", "custom_id": line["custom_id"]}
    stops = _validate_chat(req, messages)
    prefix, source = _echoed(messages)
    text, d = _parse_directives(source)
    if d.fail is not None:
        failure = {
            "status_code": d.fail,
            "request_id": secrets.token_hex(8),
            "body": error_body(f"fake upstream failure {d.fail}", "server_error"),
        }
        return False, {**head, "response": failure, "error": None}
    answer = _chat_answer(req, messages, d, prefix, text, stops)
    body = {
        **answer.head,
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "".join(answer.pieces), "refusal": None},
                "logprobs": None,
                "finish_reason": answer.finish,
            }
        ],
        "usage": answer.usage,
        "service_tier": "default",
    }
    return True, {
        **head,
        "response": {"status_code": 200, "request_id": secrets.token_hex(8), "body": body},
        "error": None,
    }
