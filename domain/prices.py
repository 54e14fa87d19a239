"""The price list: every model's price over time, as facts in the ledger.

A price change is an event (``PriceSet``: the model, its whole price, the instant it takes effect and
why), recorded by ``tollgate prices apply`` and never edited. So the price in force at any instant is
a replay away, every charge names the entry it was priced by (``Charged.price_ref``: ``MODEL@VERSION``),
and ``tollgate ledger verify`` checks that each charge used the price in force when it was made.

One aggregate holds the whole list (it changes a few times a year, not per request): the gateway
reads it at start and follows its events while it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate

from domain.ledger_errors import LedgerError
from domain.pricing import Price, PriceRecord

#: The price list's aggregate id: one per ledger.
PRICE_LIST_ID = uuid5(NAMESPACE_URL, "tollgate:price-list")


@dataclass(frozen=True, slots=True)
class PriceEntry:
    """One recorded price of a model: in force from ``effective_from`` until the next entry's."""

    model: str
    price: Price
    effective_from: datetime
    version: int  # the price list's version that recorded it
    recorded_at: datetime
    reason: str
    actor: str = ""  # who recorded it (see ``TeamLedger.Opened.actor``)

    @property
    def ref(self) -> str:
        """How a charge names it: ``MODEL@VERSION``."""
        return f"{self.model}@{self.version}"


class PriceSource(Protocol):
    """Whatever says which price of a model was in force at an instant: the price list, or a
    process's copy of it (``app/ledger/prices.py``)."""

    def in_force(self, model: str, at: datetime) -> PriceEntry | None: ...


class PriceChangeRefused(LedgerError):
    """A price change that would rewrite what was already charged."""


class PriceList(Aggregate):
    """The prices of every model, in the order they were recorded."""

    class Started(Aggregate.Created):
        pass

    class PriceSet(Aggregate.Event):
        """From ``effective_from`` (an ISO 8601 instant, UTC), ``model`` costs ``price`` (a price record)."""

        model: str
        price: PriceRecord
        effective_from: str
        reason: str
        actor: str = ""  # events recorded before actors were kept lack it

        def apply(self, prices: PriceList) -> None:
            entry = PriceEntry(
                self.model,
                Price.from_record(self.price),
                datetime.fromisoformat(self.effective_from),
                self.originator_version,
                self.timestamp,
                self.reason,
                self.actor,
            )
            prices.entries.setdefault(self.model, []).append(entry)

    @staticmethod
    def create_id() -> UUID:
        return PRICE_LIST_ID

    def __init__(self) -> None:
        self.entries: dict[str, list[PriceEntry]] = {}

    @classmethod
    def start(cls) -> PriceList:
        return cls()

    def set_price(
        self, model: str, price: Price, effective_from: datetime, now: datetime, reason: str = "", *, actor: str = ""
    ) -> None:
        """Record that ``model`` costs ``price`` from ``effective_from`` on, which may not be before
        ``now``: charges already made keep the price they were made at (a wrong past price is put
        right by re-rating the period, ``tollgate ledger rerate``, never by rewriting it)."""
        if effective_from.tzinfo is None:
            raise PriceChangeRefused("a price's effective instant must say its time zone (e.g. 2026-12-01T00:00:00Z)")
        if effective_from < now:
            raise PriceChangeRefused(
                f"a price of {model!r} cannot take effect at {effective_from.isoformat()}, before now "
                f"({now.isoformat()}): charges made since were priced at the price then in force; re-rate the period "
                "instead (tollgate ledger rerate)"
            )
        self.trigger_event(
            self.PriceSet,
            model=model,
            price=price.as_record(),
            effective_from=effective_from.isoformat(),
            reason=reason,
            actor=actor,
        )

    def in_force(self, model: str, at: datetime) -> PriceEntry | None:
        """The entry that prices ``model`` at ``at``: the latest to take effect by then (of two taking
        effect at the same instant, the one recorded last)."""
        best: PriceEntry | None = None
        for entry in self.entries.get(model, ()):
            if entry.effective_from <= at and (best is None or entry.effective_from >= best.effective_from):
                best = entry
        return best

    def history(self, model: str) -> list[PriceEntry]:
        return list(self.entries.get(model, ()))

    def entry(self, ref: str) -> PriceEntry | None:
        """The entry a charge names (``MODEL@VERSION``)."""
        model, _, version = ref.rpartition("@")
        return next((e for e in self.entries.get(model, ()) if str(e.version) == version), None)
