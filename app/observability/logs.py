"""Logging for a gateway process: one JSON object per line on standard error (or text for people).

Every line — a request's (``tollgate.access``), a failover's warning, an unexpected error with its
traceback — has the same envelope: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``; a
request's line adds its fields under ``request`` flattened into the object (see
``app.observability.access.fields``). Lines are written by a listener thread from a queue, so a
slow log reader never stalls the event loop.
"""

from __future__ import annotations

import atexit
import logging
import logging.handlers
import queue
import sys
from datetime import datetime, timezone
from typing import Any

import msgspec

_encoder = msgspec.json.Encoder()
_listener: logging.handlers.QueueListener | None = None


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request = getattr(record, "request", None)
        if request:
            line.update(request)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        return _encoder.encode(line).decode()


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        request = getattr(record, "request", None)
        if request:
            text += " " + " ".join(f"{k}={v}" for k, v in request.items() if v is not None and k not in ("method", "path"))
        return text


class _Enqueue(logging.handlers.QueueHandler):
    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        # Keep the record as it is (its ``request`` fields, its traceback) for the formatter on
        # the listener's side; only render the traceback here, while it still exists.
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.exc_info = None
        record.msg, record.args = record.getMessage(), None
        return record


def configure_logging(log_format: str = "json", level: str = "info") -> None:
    """Send every log line of this process to standard error in ``log_format`` (once per process)."""
    global _listener
    if _listener is not None:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    lines: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(_Enqueue(lines))  # type: ignore[arg-type]
    root.setLevel(logging.WARNING)
    logging.getLogger("tollgate").setLevel(level.upper())
    _listener = logging.handlers.QueueListener(lines, handler)  # type: ignore[arg-type]
    _listener.start()
    atexit.register(_listener.stop)
