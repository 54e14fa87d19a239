"""One lot of credit as a team's state keeps it (the drawing order and the rest: ``domain/credit_lots.py``).

A module of its own because ``domain.credit_lots`` is compiled (``domain/compiled.py``) and a msgspec
``Struct`` defined in a compiled module is not what its source says: mypyc gives the class
``type`` for every field's annotation, so a decoder of it refuses every value. The Struct lives
here, where the source is what runs.
"""

from __future__ import annotations

import msgspec

#: A lot's priority unless it says otherwise; lower is drawn first.
DEFAULT_PRIORITY = 50


class Lot(msgspec.Struct, frozen=True, gc=False):
    """One lot of credit, as the team's state keeps it while anything of it is left."""

    kind: str
    #: What it brought (0 for the legacy lot: its history is not split).
    amount: int
    #: What is left of it.
    remaining: int
    #: Unix time it was added (0 for the legacy lot).
    added: float
    #: Unix time it expires (None: never).
    expires: float | None = None
    priority: int = DEFAULT_PRIORITY
    #: The team version of the event that added it: the last tie-break of the order.
    seq: int = 0
    #: What the credit was for (a payment's id, an operator's reference).
    reference: str = ""

    def expired_at(self, at: float) -> bool:
        return self.expires is not None and self.expires <= at
