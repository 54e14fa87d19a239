"""The demo upstream's one tokenizer: a word and the whitespace after it is one token (deterministic,
so the demo's costs can be worked out by hand). Shared by its chat and its other endpoints."""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\S+\s*")


def demo_tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)
