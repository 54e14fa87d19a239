"""The transparency log's public endpoints (no key: anyone may check the log).

- ``GET /ledger/checkpoint``: the latest signed checkpoint (a C2SP signed note, ``text/plain``), with
  the cosignatures its witnesses gave it;
- ``GET /ledger/checkpoints?after=SIZE``: every kept checkpoint larger than ``SIZE``, oldest first
  (at most 1,000), for an auditor catching up;
- ``GET /ledger/key``: the log's verifier key;
- ``GET /ledger/proof/inclusion?leaf=I&size=N``: leaf ``I``'s hash and its inclusion proof in the tree
  of ``N`` leaves;
- ``GET /ledger/proof/consistency?from=M&to=N``: the proof that the tree of ``N`` leaves extends the
  tree of ``M``;
- ``POST /ledger/cosignatures``: a witness gives a kept checkpoint cosigned (its note with the
  witness's signature line); taken only from a configured witness whose cosignature verifies.

Hashes are standard base64. Bad input is 400 in the gateway's JSON error shape; a size beyond the log,
404.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from litestar import Request, Response, get, post

from app.errors import InvalidRequest, NotFound
from app.http.routes.admin_common import json_response
from app.runtime import Runtime
from app.store.database import Sql
from app.store.log_reads import LogReads
from domain.transparency.checkpoint import MalformedCheckpoint, parse_checkpoint
from domain.transparency.cosignature import CosignerVerifier, parse_cosigner_verifier
from domain.transparency.keys import InvalidSignature, NoteSigner
from domain.transparency.note import MalformedNote, parse_note

R = TypeVar("R")
#: The largest cosigned note taken (a checkpoint and a few signature lines).
MAX_NOTE_BYTES = 16 * 1024
_NOTE = "text/plain; charset=utf-8"
#: The largest tree size a checkpoint may state (C2SP tlog-checkpoint), and a database integer holds.
MAX_SIZE = (1 << 63) - 1


@contextmanager
def _log(runtime: Runtime) -> Iterator[LogReads]:
    sql = Sql(runtime.store.database)
    try:
        yield LogReads(sql)
    finally:
        sql.close()


async def _read(runtime: Runtime, read: Callable[[LogReads], R]) -> R:
    def run() -> R:
        with _log(runtime) as reads:
            return read(reads)

    return await asyncio.to_thread(run)


def _signer(runtime: Runtime) -> NoteSigner:
    if runtime.checkpoints is None:
        raise NotFound("This gateway signs no checkpoints: its configuration has no [transparency] table.")
    return runtime.checkpoints.signer


def _int_param(request: Request[Any, Any, Any], name: str) -> int:
    text = request.query_params.get(name)
    if text is None or not text.isascii() or not text.isdigit() or len(text) > 19 or int(text) > MAX_SIZE:
        raise InvalidRequest(f"'{name}' must be a whole number of leaves (0 to 2^63 - 1).", param=name)
    return int(text)


def _b64(hashes: Iterator[bytes] | tuple[bytes, ...] | list[bytes]) -> list[str]:
    return [base64.b64encode(h).decode("ascii") for h in hashes]


@get("/ledger/checkpoint", include_in_schema=False)
async def latest_checkpoint(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    _signer(runtime)

    def read(reads: LogReads) -> bytes | None:
        kept = reads.latest_checkpoint()
        if kept is None:
            return None
        # the kept note, then its witnesses' signature lines (each a line of its own, newline included)
        return (kept.note + "".join(reads.cosignatures(kept.size))).encode()

    note = await _read(runtime, read)
    if note is None:
        raise NotFound("No checkpoint has been signed yet.")
    return Response(note, media_type=_NOTE, headers={"cache-control": "no-store"})


@get("/ledger/checkpoints", include_in_schema=False)
async def kept_checkpoints(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    _signer(runtime)
    after = _int_param(request, "after") if "after" in request.query_params else 0
    kept = await _read(runtime, lambda reads: reads.checkpoints_after(after))
    return json_response({"checkpoints": [k.note for k in kept]})


@get("/ledger/key", include_in_schema=False)
async def log_key(request: Request[Any, Any, Any]) -> Response[bytes]:
    signer = _signer(request.app.state.runtime)
    return Response((signer.verifier.key_string + "\n").encode(), media_type=_NOTE)


@get("/ledger/proof/inclusion", include_in_schema=False)
async def inclusion_proof(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    leaf, size = _int_param(request, "leaf"), _int_param(request, "size")
    if leaf >= size:
        raise InvalidRequest(f"Leaf {leaf} is not in a tree of {size} leaves.", param="leaf")

    def read(reads: LogReads) -> dict[str, Any]:
        head = reads.head()
        if size > head.size:
            raise NotFound(f"The log has {head.size} leaves, not {size}.")
        return {
            "leaf": leaf,
            "size": size,
            "leaf_hash": _b64([reads.leaf_hash(leaf, size)])[0],
            "proof": _b64(reads.inclusion(leaf, size)),
        }

    return json_response(await _read(runtime, read))


@get("/ledger/proof/consistency", include_in_schema=False)
async def consistency_proof(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    old, new = _int_param(request, "from"), _int_param(request, "to")
    if old > new:
        raise InvalidRequest(f"A tree of {new} leaves cannot extend one of {old}.", param="from")

    def read(reads: LogReads) -> dict[str, Any]:
        head = reads.head()
        if new > head.size:
            raise NotFound(f"The log has {head.size} leaves, not {new}.")
        return {"from": old, "to": new, "proof": _b64(reads.consistency(old, new))}

    return json_response(await _read(runtime, read))


@post("/ledger/cosignatures", status_code=201, include_in_schema=False)
async def give_cosignature(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    _signer(runtime)
    body = await request.body()
    if len(body) > MAX_NOTE_BYTES:
        raise InvalidRequest("A cosigned checkpoint is a few hundred bytes.")
    witnesses = [parse_cosigner_verifier(k) for k in runtime.settings.transparency.witnesses]  # type: ignore[union-attr]
    try:
        note = parse_note(body)
        size = parse_checkpoint(note.text).size
    except (MalformedNote, MalformedCheckpoint) as exc:
        raise InvalidRequest(f"Not a cosigned checkpoint: {exc}") from None

    def keep(reads: LogReads) -> list[str]:
        kept = reads.checkpoint_at(size)
        if kept is None or parse_note(kept.note.encode()).text != note.text:
            raise NotFound(f"This log signed no checkpoint of {size} leaves with that root.")
        return _keep_cosignatures(reads, size, note.text, note.signatures, witnesses)

    taken = await _read(runtime, keep)
    if not taken:
        raise InvalidRequest("The note carries no cosignature by a witness this gateway is configured with.")
    return json_response({"size": size, "witnesses": taken}, status=201)


def _keep_cosignatures(
    reads: LogReads, size: int, text: str, signatures: Any, witnesses: list[CosignerVerifier]
) -> list[str]:
    taken: list[str] = []
    for signature in signatures:
        for witness in witnesses:
            try:
                cosigned = witness.check(text, signature)
            except InvalidSignature as exc:
                raise InvalidRequest(f"The cosignature does not verify: {exc}") from None
            if cosigned is not None:
                reads.keep_cosignature(size, witness.name, signature.line, cosigned.timestamp)
                taken.append(witness.name)
    return taken


log_handlers = [latest_checkpoint, kept_checkpoints, log_key, inclusion_proof, consistency_proof, give_cosignature]
