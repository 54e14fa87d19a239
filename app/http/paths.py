"""One path per route: ``/v1/chat/completions/`` and ``//v1//chat/completions`` are that endpoint.

Litestar's router matches a path with its slashes normalised (no trailing one, no doubles), so such
a request was served and billed — but everything that read the path as it came named it otherwise:
its metrics and log line said ``endpoint="other"``, its record was not kept for the request lookup,
and the generation endpoints' fast path did not take it. So the path is made canonical once, where
the request line is parsed (``app/http/protocol.py``), before anything reads it, with the router's
own rule; the root stays ``/``.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from typing import Any

_SLASHES = re.compile("/{2,}")
_RAW_SLASHES = re.compile(b"/{2,}")


def canonical(path: str) -> str:
    return "/" + _SLASHES.sub("/", path.strip("/"))


def make_canonical(scope: MutableMapping[str, Any]) -> None:
    """Rewrite the scope's ``path`` and ``raw_path`` canonical, if they are not (most are: one test)."""
    path = scope.get("path")
    if not path or ("//" not in path and (path[-1] != "/" or path == "/")):
        return
    scope["path"] = canonical(path)
    raw = scope.get("raw_path")
    if raw is not None:
        scope["raw_path"] = b"/" + _RAW_SLASHES.sub(b"/", raw.strip(b"/"))
