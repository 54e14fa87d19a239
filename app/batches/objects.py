"""A batch and a file as OpenAI's API shows them, made from the gateway's rows.

The upstream's own batch object (as last polled) gives the times and the request counts; the ids are
the gateway's (the batch's, its input file's, and the output and error files it made of the
upstream's), and the status is the gateway's until the batch is settled: a batch the upstream says
is done shows ``finalizing`` while its lines are being charged, so a client that polls until
``completed`` finds every line charged when it gets there.
"""

from __future__ import annotations

from typing import Any

import msgspec

from app.store.batch_store import StoredBatch, StoredFile

#: The statuses in which a batch runs no more (OpenAI's).
FINAL = frozenset({"completed", "failed", "expired", "cancelled"})


def file_object(stored: StoredFile) -> dict[str, Any]:
    return {
        "id": stored.file_id,
        "object": "file",
        "bytes": stored.bytes,
        "created_at": stored.created_at,
        "filename": stored.filename,
        "purpose": stored.purpose,
        "status": "processed",
        "status_details": None,
    }


def batch_object(
    batch: StoredBatch, output_file_id: str | None = None, error_file_id: str | None = None
) -> dict[str, Any]:
    upstream: dict[str, Any] = msgspec.json.decode(batch.upstream or "{}")
    counts = upstream.get("request_counts") if isinstance(upstream.get("request_counts"), dict) else None
    return {
        "id": batch.batch_id,
        "object": "batch",
        "endpoint": batch.endpoint,
        "errors": upstream.get("errors"),
        "input_file_id": batch.input_file_id,
        "completion_window": upstream.get("completion_window", "24h"),
        "status": batch.status,
        "output_file_id": output_file_id,
        "error_file_id": error_file_id,
        "created_at": batch.created_at,
        "in_progress_at": upstream.get("in_progress_at"),
        "expires_at": upstream.get("expires_at"),
        "finalizing_at": upstream.get("finalizing_at"),
        "completed_at": upstream.get("completed_at"),
        "failed_at": upstream.get("failed_at"),
        "expired_at": upstream.get("expired_at"),
        "cancelling_at": upstream.get("cancelling_at"),
        "cancelled_at": upstream.get("cancelled_at"),
        "request_counts": counts or {"total": batch.lines, "completed": 0, "failed": 0},
        "metadata": msgspec.json.decode(batch.metadata or "null"),
        "model": batch.model,
    }


def status_while_open(upstream_status: str) -> str:
    """What a batch not yet settled shows: the upstream's status, ``finalizing`` once it has ended."""
    return "finalizing" if upstream_status in FINAL else upstream_status or "validating"
