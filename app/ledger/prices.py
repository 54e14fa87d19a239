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
from domain.settings import Model, Settings

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
            for key, price in self._priced_keys():
                if prices.in_force(key, now) is None:
                    prices.set_price(key, price, now, now, FIRST_PRICE)
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
        for key, price in self._priced_keys():
            entry = self._list.in_force(key, now)
            if entry is None or entry.price != price:
                out.append(key)
        return out

    def _priced_keys(self) -> list[tuple[str, Price]]:
        """Every price the file gives, by its key: each model's, and each deployment's of its own."""
        return [priced for model in self._settings.models for priced in model.priced_keys()]

    def prices_for(self, model: Model) -> list[Price]:
        """The prices in force now that ``model``'s requests may be charged at: its own and its
        deployments' (a hold reserves the dearest of them)."""
        return [self.current(key) for key in model.price_keys()]

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
        for configured in self._settings.models:
            for key, price in configured.priced_keys():
                if key == model:
                    return price
        raise KeyError(model)

    @property
    def price_list(self) -> PriceList:
        return self._list


class DeploymentPrices:
    """The price list as one deployment's charges read it: the entry in force under its key
    (``MODEL/NAME``) rather than the model's, so the charge names that entry (``price_ref``)."""

    def __init__(self, book: PriceBook, key: str) -> None:
        self._book = book
        self._key = key

    def in_force(self, model: str, at: datetime) -> PriceEntry | None:
        return self._book.in_force(self._key, at)
