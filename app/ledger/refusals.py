"""The ledger service's own refusals: what it says no with, besides the team ledger's (``domain/ledger_errors.py``).

The service layer speaks the ledger's language only: it never knows an HTTP status. Each refusal here
carries ``told``, the words a client or an operator reads, like the domain's; the HTTP application
answers every one of them by its one table (``app/http/refusals.py``), and the CLI prints ``told``.
"""

from __future__ import annotations

from domain.ledger_errors import LedgerError


class ServiceRefusal(Exception):
    """The ledger service cannot do what it was asked now (the ledger is away, or the request must
    not go ahead); nothing was charged. Its message is what the client is told."""

    @property
    def told(self) -> str:
        return str(self)


class LedgerNotWritable(ServiceRefusal):
    """The ledger cannot be written now (``app/ledger/health.py``): no request is held, so none is
    served that could not be charged."""

    def __init__(self) -> None:
        super().__init__(
            "The billing ledger cannot be written right now, so the gateway serves nothing it could not "
            "charge; nothing was charged. Retry shortly."
        )


class ChargeOwed(ServiceRefusal):
    """A stream's charge the ledger could not record (``why``); it is owed, and made when the ledger
    can be written again."""

    def __init__(self, why: Exception) -> None:
        super().__init__(
            f"The billing ledger is unavailable ({why}); this stream will be charged once it can be written again."
        )


class ChargeNotRecorded(ServiceRefusal):
    """The ledger refused a charge (``refused``) and no earlier charge of the request stands for it."""

    def __init__(self, refused: Exception) -> None:
        super().__init__(f"The billing ledger could not record this request's charge: {refused}")


class VerifyUnavailable(ServiceRefusal):
    """A run of ``ledger verify`` ended without a report (``why``)."""

    def __init__(self, why: str) -> None:
        super().__init__(f"The ledger could not be verified now: {why}")


class IdempotencyKeyReused(LedgerError):
    """An Idempotency-Key used before for a request with another body."""

    def __init__(self) -> None:
        super().__init__("This Idempotency-Key was already used for a different request body.")


#: Everything the ledger and its service refuse with, which a caller answers rather than fails on.
REFUSALS = (LedgerError, ServiceRefusal)
