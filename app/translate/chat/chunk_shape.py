"""What the chat pass-through reads of a streamed chunk (``app/translate/chat/passthrough.py``).

A module of its own, not compiled, because the pass-through is (``domain/compiled.py``) and a
msgspec ``Struct`` defined in a compiled module is not what its source says: mypyc gives the class
``type`` for every field's annotation, so the decoder refused every chunk and each one took the slow
path (read whole, as a dict): about 0.7 M instructions more a stream of 21 chunks (callgrind,
docs/performance.md).
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UnsetType

from app.translate.raw_json import UNSET


class Delta(msgspec.Struct):
    content: Any = None
    reasoning_content: Any = None
    reasoning: Any = None
    tool_calls: Any = None


class Choice(msgspec.Struct):
    delta: Delta | None = None


class Chunk(msgspec.Struct):
    """What the relay reads of a chunk: the rest of it is skipped by the decoder, unread."""

    id: Any = None
    created: Any = None
    model: Any = UNSET
    system_fingerprint: Any = UNSET
    choices: list[Choice] | UnsetType = UNSET
    usage: Any = UNSET
    service_tier: Any = None


read_chunk = msgspec.json.Decoder(Chunk).decode
