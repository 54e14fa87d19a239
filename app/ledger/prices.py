"""The prices this process charges at: the ledger's price list, read at start and followed.

The configuration file *proposes* prices; the ledger's price list (``domain/prices.py``) is what
charges use, so that every charge names a recorded price and an auditor can say which price was in
force for it. At start a model the list has no price for gets the file's, recorded as its first
price; a file whose price differs from the list's is reported, and ``tollgate prices apply`` records
it. While the gateway runs, a price recorded by any process (the CLI, another gateway) is followed
by the projector (``reload``), and a change scheduled for later takes effect at its instant: a charge
is priced by the entry in force at the very instant its event records (``TeamLedger.charge``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from app.store.event_store import LedgerStore
from app.store.store_errors import VersionConflict
from domain.prices import PriceEntry, PriceList
from domain.pricing import Price
from domain.settings import Settings

log = logging.getLogger("tollgate.prices")

FIRST_PRICE = "first price of the model, from the configuration file"


class PriceBook:
    """The price list as the writer and the request path read it (any thread): the list is
    replaced whole when it changes, never changed in place."""

    def __init__(self, store: LedgerStore, settings: Settings) -> None:
        self._store = store
        self._settings = settings
        self._list = PriceList.start()

    def open(self) -> PriceBook:
        """Read the price list, recording the file's price for every model the list has no price
        in force for (once, however many processes start together); then say which models' file
        price differs from the list's."""
        prices = PriceList.start()
        for _ in range(10):
            prices = self._store.load_prices() or PriceList.start()
            now = datetime.now(UTC)
            for model in self._settings.models:
                if prices.in_force(model.id, now) is None:
                    prices.set_price(model.id, model.price, now, now, FIRST_PRICE)
            if not prices.pending_events:
                break
            try:
                self._store.save_prices(prices)
                break
            except VersionConflict:  # another process recorded a price meanwhile: read the list again
                continue
        self._list = prices
        for model_id in self.differing():
            log.warning(
                "the configuration's price of model %s differs from the ledger's price list, which charges "
                "use; `tollgate prices apply` records the file's",
                model_id,
            )
        return self

    def differing(self) -> list[str]:
        """The models whose file price is not the price the list has in force now."""
        now = datetime.now(UTC)
        out = []
        for model in self._settings.models:
            entry = self._list.in_force(model.id, now)
            if entry is None or entry.price != model.price:
                out.append(model.id)
        return out

    def reload(self) -> None:
        """Read the list again (a price was recorded somewhere)."""
        prices = self._store.load_prices()
        if prices is not None:
            self._list = prices  # one assignment: a reader on another thread sees the old list or the new

    def in_force(self, model: str, at: datetime) -> PriceEntry | None:
        return self._list.in_force(model, at)

    def current(self, model: str) -> Price:
        """The model's price in force now (the file's if the list has none: a model the list has no
        price for cannot be charged, see ``open``)."""
        entry = self._list.in_force(model, datetime.now(UTC))
        if entry is not None:
            return entry.price
        configured = self._settings.model(model)
        if configured is None:
            raise KeyError(model)
        return configured.price

    @property
    def price_list(self) -> PriceList:
        return self._list
