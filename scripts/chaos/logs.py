"""What the gateways logged as going wrong, for the report (not a verdict of its own).

A gateway under chaos is expected to log errors — the database went away, a stream was cut — so
log lines are not violations; but the distinct messages, counted, are the first place to look when a
check fails, and a traceback in a log is worth a look even when every answer was right.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

_NUMBERS = re.compile(r"\b(req|lease|key)_[0-9a-f]+\b|\d+(\.\d+)?")


def log_problems(path: Path) -> Counter[str]:
    """Error and critical lines (and warnings about the ledger), by message with ids and numbers
    blanked out, plus every traceback's last line."""
    found: Counter[str] = Counter()
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return found
    for i, line in enumerate(lines):
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("level") in ("error", "critical") or record.get("exception"):
                message = f"{record.get('level')} {record.get('logger')}: {record.get('message', '')}"
                exception = str(record.get("exception") or "").strip().splitlines()
                if exception:
                    message += f" [{exception[-1][:160]}]"
                found[_NUMBERS.sub("N", message)[:240]] += 1
        elif line.startswith("Traceback"):
            last = next(
                (
                    following
                    for following in lines[i + 1 :]
                    if following and not following.startswith((" ", "Traceback"))
                ),
                "?",
            )
            found[f"traceback: {_NUMBERS.sub('N', last)[:200]}"] += 1
    return found
