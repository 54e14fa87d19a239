"""The `[transparency]` table: the key the gateway signs its log's checkpoints and receipts with,
how often it signs, and the witnesses whose cosignatures it takes.

Every ledger event is appended to the transparency log whatever this table says (docs/transparency.md);
without it the gateway signs nothing: no checkpoint, no receipt.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import msgspec

from domain.settings_models import _Strict


class Transparency(_Strict, frozen=True):
    #: The environment variable holding the log's signer key (`PRIVATE+KEY+<origin>+…`, as `tollgate
    #: log keygen` prints it; the key's name is the log's origin). `tollgate serve` refuses to start
    #: while neither it nor `key_file` gives one.
    key_env: str = "TOLLGATE_LOG_KEY"
    #: A file holding the signer key instead (relative to the configuration file's folder).
    key_file: str | None = None
    #: How often, in seconds, a new checkpoint is signed while events arrive.
    checkpoint_seconds: Decimal = Decimal(2)
    #: The witnesses whose cosignatures `POST /ledger/cosignatures` takes and `GET /ledger/checkpoint`
    #: serves: their verifier keys (`<name>+<hex id>+<base64>`, as `tollgate log witness-keygen` prints them).
    witnesses: list[str] = msgspec.field(default_factory=list)


def check_transparency(log: Transparency, fail: Callable[[str, str], None]) -> None:
    """The table's rules the schema cannot say (``fail`` raises, naming the key)."""
    from domain.transparency.cosignature import parse_cosigner_verifier
    from domain.transparency.keys import KeyFormatError

    if not Decimal("0.1") <= log.checkpoint_seconds <= 3600:
        fail("transparency.checkpoint_seconds", "from 0.1 to 3600 seconds")
    for at, key in enumerate(log.witnesses):
        try:
            parse_cosigner_verifier(key)
        except KeyFormatError as exc:
            fail(f"transparency.witnesses[{at}]", f"not a witness's verifier key ({exc})")
