"""Logging for a gateway process: one JSON object per line on standard error (or text for people).

Every line — a request's (``tollgate.access``), a failover's warning, an unexpected error with its
traceback — has the same envelope: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``; a
request's line adds its fields under ``request`` flattened into the object (see
``app.observability.access.fields``). Lines are written in batches (``BatchedLines``).
"""

from __future__ import annotations

import atexit
import logging
import re
import sys
import threading
from datetime import UTC, datetime
from typing import Any

import msgspec

from app.observability import timeline

_encoder = msgspec.json.Encoder()
_handler: BatchedLines | None = None
#: Characters JSON may leave unescaped in a string that some readers still take for the end of a
#: line (Python's ``str.splitlines``, JavaScript): NEL and the Unicode line and paragraph separators.
_JSON_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
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
        text = _encoder.encode(line).decode()  # control characters (newlines) are escaped by JSON itself
        return text if text.isascii() else text.translate(_JSON_LINE_BREAKS)


#: Characters that end a line, or move the cursor, somewhere: C0 and C1 controls, DEL, and the
#: Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escaped(text: str) -> str:
    """``text`` with its control characters written as escapes (``\\n``, ``\\x1b``, ``\\u2028``)."""
    return _CONTROL.sub(lambda m: _NAMED.get(m.group()) or m.group().encode("unicode_escape").decode(), text)


def _field(value: Any) -> str:
    """A ``key=value`` field's value: escaped, and quoted when it has a space, ``=`` or ``"``
    (so a value cannot pass for more fields)."""
    text = escaped(str(value))
    if not text or any(c in text for c in ' ="'):
        text = '"' + text.replace('"', '\\"') + '"'
    return text


class TextFormatter(logging.Formatter):
    """One line per record for people: time, level, logger, message, then the request's fields as
    ``key=value``. What a client sent (a path, a model name) reaches these lines, so each field is
    escaped: no request can start a line of its own. A traceback follows on lines of its own, each
    indented, as no record's first line is."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"{self.formatTime(record)} {record.levelname} {record.name}: {escaped(record.getMessage())}"
        request = getattr(record, "request", None)
        if request:
            text += " " + " ".join(
                f"{k}={_field(v)}" for k, v in request.items() if v is not None and k not in ("method", "path")
            )
        exception = self.formatException(record.exc_info) if record.exc_info else record.exc_text
        if exception:
            text += "".join(f"\n    {escaped(line)}" for line in exception.splitlines())
        return text


class BatchedLines(logging.Handler):
    """Formats each line where it is logged and writes them in batches: at most every
    ``FLUSH_SECONDS``, or at once for a warning or worse. A thread woken for every line (a queue
    listener) cost the event loop far more in GIL hand-offs than the line itself (scripts/bench);
    here the loop appends to a list and one write a batch goes out from a timer thread."""

    FLUSH_SECONDS = 0.1
    MAX_LINES = 256

    def __init__(self, stream: Any) -> None:
        super().__init__()
        self._stream = stream
        self._lines: list[str] = []
        self._stopped = threading.Event()
        self._timer = threading.Thread(target=self._flush_regularly, name="tollgate-log-writer", daemon=True)
        self._timer.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:  # noqa: BLE001 - logging's own contract: a line that cannot be formatted goes to handleError
            self.handleError(record)
            return
        self._lines.append(line)  # list.append is atomic under the GIL
        if record.levelno >= logging.WARNING or len(self._lines) >= self.MAX_LINES:
            self.flush()

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            lines, self._lines = self._lines, []
            if lines:
                try:
                    with timeline.span("log.flush", len(lines)):
                        self._stream.write("\n".join(lines) + "\n")
                        self._stream.flush()
                except Exception:  # noqa: BLE001 - a closed or broken stderr must never take a request down
                    pass

    def _flush_regularly(self) -> None:
        while not self._stopped.wait(self.FLUSH_SECONDS):
            self.flush()

    def close(self) -> None:
        self._stopped.set()
        self.flush()
        super().close()


def configure_logging(log_format: str = "json", level: str = "info") -> None:
    """Send every log line of this process to standard error in ``log_format`` (once per process)."""
    global _handler
    if _handler is not None:
        return
    _handler = BatchedLines(sys.stderr)
    _handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    # The lines name no source file, thread or process: the logging HOWTO's "Optimization" switches
    # spare every record the stack walk and the look-ups (a line per request on the hot path).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(_handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("tollgate").setLevel(level.upper())
    atexit.register(_handler.close)
