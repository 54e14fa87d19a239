"""OpenAI's Files API for batches: ``/v1/files`` upload, list, retrieve, content and delete.

A team's files are its own: another team's file id is a 404, as an unknown one is. An upload
(``multipart/form-data``: ``purpose`` = ``batch`` and ``file``) is parsed as it arrives and stored a
chunk at a time (``app/store/batch_store.py``): never whole in memory. A batch's output and error
files are the upstream's: their content is streamed through from it, never buffered.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import multipart
from litestar import Request, Response, delete, get, post
from litestar.params import FromPath
from litestar.response import Stream

from app.batches.deployments import openai_client
from app.errors import InvalidRequest, NotFound
from app.http.routes.admin_common import json_response
from app.http.routes.auth import authenticate
from app.http.routes.batch_common import body_hash, keep, key_of, page, page_limit, relay, replayed
from app.runtime import Runtime
from app.store.batch_store import CHUNK_BYTES, PROCESSED, StoredFile
from domain.client_text import ClientTextError, checked_text

#: The largest upload (OpenAI's limit for a batch's input file).
MAX_FILE_BYTES = 200 * 1024 * 1024
UPLOADING = "uploading"
#: The longest file name an upload may carry (it is stored, listed and shown as sent).
MAX_FILE_NAME = 255


def _no_file(file_id: str) -> NotFound:
    return NotFound(f"No such File object: {file_id}", param="id")


async def _find(runtime: Runtime, team_name: str, file_id: str) -> StoredFile:
    found = await asyncio.to_thread(runtime.batches.find_file, team_name, file_id)
    if found is None:
        raise _no_file(file_id)
    return found


def _boundary(request: Request[Any, Any, Any]) -> str:
    content_type, options = multipart.parse_options_header(request.headers.get("content-type", ""))
    if content_type != "multipart/form-data" or not options.get("boundary"):
        raise InvalidRequest("A file is uploaded as multipart/form-data, with the fields 'purpose' and 'file'.")
    return str(options["boundary"])


class _Upload:
    """One upload being received: its ``purpose`` field and its ``file`` part, stored as it comes."""

    def __init__(self, runtime: Runtime, team_name: str, storing: bool = True) -> None:
        self.runtime = runtime
        #: False: a retry under an Idempotency-Key answered before, read only to be compared.
        self.storing = storing
        self.content_hash = hashlib.sha256()
        self.file_id = f"file-{uuid.uuid4().hex}"
        self.team_name = team_name
        self.purpose = ""
        self.filename = ""
        self.size = 0
        self._seq = 0
        self._buffer = bytearray()
        self._started = False

    async def start(self, filename: str) -> None:
        self.filename = filename or "upload.jsonl"
        if not self.storing:
            return
        stored = StoredFile(self.file_id, self.team_name, "batch", self.filename, 0, int(time.time()), UPLOADING)
        await asyncio.to_thread(self.runtime.batches.add_file, stored)
        self._started = True

    async def data(self, chunk: bytes) -> None:
        self.size += len(chunk)
        self.content_hash.update(chunk)
        if not self.storing:
            return
        self._buffer += chunk
        if len(self._buffer) >= CHUNK_BYTES:
            await self._flush()

    async def _flush(self) -> None:
        if self._buffer:
            await asyncio.to_thread(self.runtime.batches.add_chunk, self.file_id, self._seq, bytes(self._buffer))
            self._seq += 1
            self._buffer.clear()

    async def finish(self) -> StoredFile:
        await self._flush()
        await asyncio.to_thread(self.runtime.batches.finish_file, self.file_id, self.size)
        return StoredFile(self.file_id, self.team_name, "batch", self.filename, self.size, int(time.time()), PROCESSED)

    def digest(self) -> bytes:
        """What an Idempotency-Key is compared by: the purpose, the file's name and its bytes."""
        return body_hash(self.purpose.encode(), self.filename.encode(), self.content_hash.digest())

    async def drop(self) -> None:
        if self._started:
            await asyncio.to_thread(self.runtime.batches.drop_file, self.file_id)


async def _receive(request: Request[Any, Any, Any], upload: _Upload) -> None:
    """Parse the multipart body as it arrives: the ``purpose`` field (at most 64 bytes) and the
    ``file`` part (stored a chunk at a time); any other part is refused."""
    parser = multipart.PushMultipartParser(
        _boundary(request), max_header_size=4096, max_header_count=8, max_segment_count=4
    )
    part = ""
    field = bytearray()
    async for chunk in request.stream():
        if not chunk:
            continue
        for event in parser.parse(chunk):
            if isinstance(event, multipart.MultipartSegment):
                part = event.name
                field.clear()
                if part == "file":
                    await upload.start(_file_name(event.filename or "", upload))
                elif part != "purpose":
                    raise InvalidRequest(f"Unexpected field '{part}': a file upload takes 'purpose' and 'file'.")
            elif event is None:
                if part == "purpose":
                    upload.purpose = field.decode("utf-8", "replace")
                part = ""
            elif part == "file":
                await upload.data(bytes(event))
            else:
                field += event
                if len(field) > 64:
                    raise InvalidRequest("Invalid 'purpose'.", param="purpose")
    parser.close()


def _file_name(name: str, upload: _Upload) -> str:
    """The ``file`` part's name, stored and shown as sent: so it follows the rule for client text
    (``domain/client_text.py``: no NUL, control or bidirectional character, which a database or a
    listing would not keep as it is), and an upload has one ``file`` part."""
    if upload.filename:
        raise InvalidRequest("The upload has more than one 'file' part: send one file per upload.", param="file")
    try:
        return checked_text(name, "filename", MAX_FILE_NAME)
    except ClientTextError as exc:
        raise InvalidRequest(f"Invalid file name: {exc}.", param="file") from None


@post("/v1/files", status_code=200, request_max_body_size=MAX_FILE_BYTES)
async def upload_file(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Store an upload; under an Idempotency-Key, once (``batch_common.py``): a retry's bytes are read
    and compared, not stored again."""
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    asked = key_of(request)
    kept = await asyncio.to_thread(runtime.ledger.stored_answer, principal.team_id, asked.key) if asked else None
    upload = _Upload(runtime, principal.team_name, storing=kept is None)
    try:
        await _received(request, upload)
        idem = key_of(request, upload.digest())
        if kept is not None and idem is not None:
            await upload.drop()
            return replayed(kept, idem)
        stored = await upload.finish()
        answer, mine = await keep(runtime, principal, idem, stored.file_id, _file_object(stored))
        if not mine:  # another attempt under the key stored its copy first: this one goes
            await upload.drop()
        return answer
    except BaseException:
        await upload.drop()
        raise


async def _received(request: Request[Any, Any, Any], upload: _Upload) -> None:
    """The whole upload read (and stored, unless a retry's), its fields checked."""
    try:
        await _receive(request, upload)
    except multipart.MultipartError as exc:
        raise InvalidRequest(f"The multipart body cannot be read: {exc}.") from None
    if upload.purpose != "batch":
        raise InvalidRequest(
            f"Invalid 'purpose': this gateway stores files for batches only ('batch'), got '{upload.purpose}'.",
            param="purpose",
        )
    if not upload.filename:
        raise InvalidRequest("Missing the 'file' part.", param="file")


def _file_object(stored: StoredFile) -> dict[str, Any]:
    from app.batches.objects import file_object

    return file_object(stored)


@get("/v1/files")
async def list_files(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    limit = page_limit(request, 10_000, 10_000)
    purpose, after = request.query_params.get("purpose"), request.query_params.get("after")
    files = await asyncio.to_thread(runtime.batches.list_files, principal.team_name, purpose, limit + 1, after)
    return json_response(page([_file_object(f) for f in files[:limit]], len(files) > limit))


@get("/v1/files/{file_id:str}")
async def retrieve_file(request: Request[Any, Any, Any], file_id: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    return json_response(_file_object(await _find(runtime, principal.team_name, file_id)))


@delete("/v1/files/{file_id:str}", status_code=200)
async def delete_file(request: Request[Any, Any, Any], file_id: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    if not await asyncio.to_thread(runtime.batches.delete_file, principal.team_name, file_id):
        raise _no_file(file_id)
    return json_response({"id": file_id, "object": "file", "deleted": True})


@get("/v1/files/{file_id:str}/content")
async def file_content(request: Request[Any, Any, Any], file_id: FromPath[str]) -> Stream:
    """An upload's bytes from the database, or an output file's from the upstream: streamed either way."""
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    stored = await _find(runtime, principal.team_name, file_id)
    if not stored.upstream_file_id:
        return Stream(_stored_chunks(runtime, stored.file_id), media_type="application/octet-stream")
    batch = await asyncio.to_thread(runtime.batches.find_batch, stored.batch_id)
    model = runtime.settings.model(batch.model) if batch is not None else None
    if batch is None or model is None:
        raise _no_file(file_id)
    opened = openai_client(model, batch.deployment).content(stored.upstream_file_id)
    return await relay(opened, "The file's content", "application/octet-stream")


async def _stored_chunks(runtime: Runtime, file_id: str) -> AsyncIterator[bytes]:
    chunks = runtime.batches.chunks(file_id)
    while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
        yield chunk
