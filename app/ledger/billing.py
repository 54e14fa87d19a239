"""Billing a request: the hold before it goes upstream, the charge after it is answered.

The arithmetic lives in the domain (pricing and the ``TeamLedger`` commands); this module only
decides *what* to ask the ledger and turns its answers into the ``usage`` fields clients read.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from app.keys import Principal
from app.ledger.durable import durable
from app.ledger.leases import Lease, Leases
from app.ledger.prices import DeploymentPrices, PriceBook
from app.ledger.receipts import Charge, signed_receipt
from app.ledger.refusals import ChargeNotRecorded, ChargeOwed, IdempotencyKeyReused, LedgerNotWritable
from app.ledger.results import AnswerToStore, Charged, Held, Released
from app.ledger.service import LedgerService, TeamRequest
from app.ledger.writer import LedgerUnavailable, RefusedByStore
from app.observability import metrics
from app.observability.record import RequestRecord
from app.ratelimit import Admission, RateLimiter
from app.store.read_models import IdempotentResponse
from domain.attribution import Attribution
from domain.ledger import (
    AlreadyCharged,
    BudgetExceeded,
    HoldNotFound,
    InsufficientCredits,
    TeamLedger,
)
from domain.pricing import Exposure, Quote, affordable_output_tokens, worst_case_in_micros
from domain.settings import Model, Settings
from domain.transparency.keys import NoteSigner
from domain.usage import TokenUsage

log = logging.getLogger("tollgate.billing")


@dataclass(frozen=True, slots=True)
class Idempotency:
    """The client's Idempotency-Key, and a hash of the request it was first used for."""

    key: str
    body_hash: str


@dataclass(slots=True)
class RequestBill:
    """One request's billing context: who pays, for which model, under which request id."""

    principal: Principal
    model: Model
    request_id: str
    endpoint: str
    idempotency: Idempotency | None = None
    admission: Admission | None = None  # what it took from its rate limits, corrected once settled
    lease: Lease | None = None  # the lease it is held against in memory (None: a durable hold)
    held: int = 0  # what it holds against that lease
    record: RequestRecord | None = None  # what its log line and metrics will say
    open: bool = False  # held, and not yet charged or released
    attribution: Attribution = field(default_factory=Attribution)  # its tags and end user
    #: The price list key of the deployment that answered, when it has a price of its own ("": the model's).
    price_key: str = ""

    @property
    def on_ledger(self) -> TeamRequest:
        """The request as the ledger records it."""
        p = self.principal
        return TeamRequest(
            p.team_id,
            p.team_name,
            self.request_id,
            p.key_id,
            self.model.id,
            self.endpoint,
            self.attribution.tags,
            self.attribution.end_user,
        )


#: Renders a request's answer (or a stream's final frames) once its charge is known.
Render = Callable[[Charge], bytes]


def _always() -> bool:
    return True


@dataclass(frozen=True, slots=True)
class ThisProcess:
    """What billing asks of the gateway process it runs in: its instance id, recorded on every hold
    (``app/store/instances.py``), and whether the ledger can be written now (``app/ledger/health.py``;
    while it cannot, no request is held, so none is served that could not be charged)."""

    owner: Callable[[], str] = str
    writable: Callable[[], bool] = _always


#: A process of no registry whose ledger is always writable (the tests', the tools').
A_PROCESS = ThisProcess()


class Billing:
    def __init__(
        self,
        ledger: LedgerService,
        settings: Settings,
        prices: PriceBook,
        limiter: RateLimiter | None = None,
        leases: Leases | None = None,
        process: ThisProcess = A_PROCESS,
    ) -> None:
        self._ledger = ledger
        self._prices = prices
        self._writable = process.writable
        self._owner = process.owner
        self._idempotency_ttl = float(settings.idempotency_ttl)
        #: Charges for answers already delivered that the ledger could not record, to make again.
        self._owed: list[tuple[RequestBill, TokenUsage]] = []
        self._credits_per_usd = settings.credits_per_usd
        self._limiter = limiter
        self._leases = leases
        #: The transparency log's key, when the gateway signs each charge's receipt (``[transparency]``).
        self.receipts: NoteSigner | None = None

    def _used(self, bill: RequestBill, tokens: int) -> None:
        """The request is settled: its rate-limit token estimate becomes what it really used."""
        if self._limiter is not None and bill.admission is not None:
            self._limiter.correct_soon(bill.admission, tokens)

    def worst_case(
        self, principal: Principal, model: Model, prompt_bound: int, max_output_tokens: int, exposure: Exposure
    ) -> int:
        """What a hold reserves: the dearest the request could cost at the price in force now and
        the team's price adjustment."""
        adjustment = principal.adjustment_for(model.id)
        return max(
            worst_case_in_micros(prompt_bound, max_output_tokens, price, self._credits_per_usd, exposure, adjustment)
            for price in self._prices.prices_for(model)  # whichever deployment serves it
        )

    def quote(self, principal: Principal, model: Model) -> Quote:
        """The price a hold of ``model`` for ``principal`` is sized at now (its price in force, the
        credit rate, the team's adjustment): what endpoints other than generation size holds with."""
        return Quote(self._prices.current(model.id), self._credits_per_usd, principal.adjustment_for(model.id))

    def affordable(
        self, principal: Principal, model: Model, prompt_bound: int, ceiling: int, exposure: Exposure, available: int
    ) -> int:
        """The largest output allowance (up to ``ceiling``) whose worst case ``available`` covers."""
        prices, adjustment = self._prices.prices_for(model), principal.adjustment_for(model.id)
        return affordable_output_tokens(
            available,
            ceiling,
            lambda output: max(
                worst_case_in_micros(prompt_bound, output, price, self._credits_per_usd, exposure, adjustment)
                for price in prices
            ),
        )

    async def hold(self, bill: RequestBill, amount: int) -> IdempotentResponse | None:
        """Reserve ``amount`` before going upstream (refused with ``InsufficientCredits`` if the team
        cannot afford it, ``TeamSuspended``, ``LedgerNotWritable`` or ``LedgerUnavailable``).

        With an Idempotency-Key, returns the stored answer instead if the request was served
        before, and refuses a retry while the first attempt runs (``RequestInProgress``) or a reuse
        for another body (``IdempotencyKeyReused``).
        The stored answer is looked up inside the ledger writer, against the very team state the
        hold is decided on, so no retry can slip between a charge and its stored answer.
        """
        p, idem = bill.principal, bill.idempotency
        if not self._writable():
            raise LedgerNotWritable
        # A key with a budget of its own is held in the ledger, where its budget is: a lease is the team's.
        if idem is None and self._leases is not None and not p.budgeted:
            try:
                bill.lease = await self._leases.reserve(p.team_id, p.team_name, amount)
            except InsufficientCredits as exc:  # what this request may have is the team's and its lease's free part
                free = exc.available + self._leases.free(p.team_id)
                raise (
                    exc.leaving(free)
                    if isinstance(exc, BudgetExceeded)
                    else InsufficientCredits(exc.team, amount, free)
                ) from None
            bill.held = amount
            self._opened(bill)
            return None

        placing = self._ledger.hold(
            bill.on_ledger, amount, owner=self._owner(), idem_key=idem.key if idem is not None else ""
        )
        try:
            held = await durable(placing)
        except asyncio.CancelledError:  # the request was cut off while its hold was being placed
            placing.add_done_callback(lambda done: self._release_if_placed(bill, done))
            raise
        if held.stored_answer is not None:  # served before: no hold was placed
            if idem is not None and held.stored_answer.body_hash != idem.body_hash:
                raise IdempotencyKeyReused
            return held.stored_answer
        self._opened(bill)
        return None

    def _release_if_placed(self, bill: RequestBill, placing: Future[Held]) -> None:
        """A hold placed for a request nobody waits for any more is released at once, not left to
        ``hold_timeout`` (on the writer thread, which queues the release for its next batch)."""
        if placing.cancelled() or placing.exception() is not None or placing.result().stored_answer is not None:
            return
        self._ledger.release(bill.on_ledger, "cut off before it went upstream")

    @staticmethod
    def _opened(bill: RequestBill) -> None:
        bill.open = True
        metrics.OPEN_HOLDS.inc()
        if bill.record is not None:
            bill.record.holding()

    @staticmethod
    def _closed(bill: RequestBill, charged: TeamLedger.Charged | None = None, usage: TokenUsage | None = None) -> None:
        """The hold was charged (``charged``: the ``Charged`` event) or released, or could not be.
        Runs on the event loop."""
        if not bill.open:
            return
        bill.open = False
        metrics.OPEN_HOLDS.dec()
        if bill.record is not None:
            if charged is not None and usage is not None:
                bill.record.charge(usage, charged.charged)
            bill.record.settled()

    def _submit_charge(
        self,
        bill: RequestBill,
        usage: TokenUsage,
        render: Render | None = None,
        prefix: bytes = b"",
        content_type: str = "application/json",
    ) -> Future[Charged]:
        idem, credits_per_usd = bill.idempotency, self._credits_per_usd
        lease_id = bill.lease.lease_id if bill.lease is not None else ""
        answer = None
        if idem is not None and render is not None and not lease_id:
            answer = AnswerToStore(
                idem.key,
                idem.body_hash,
                content_type,
                prefix,
                self._idempotency_ttl,
                lambda event, cost: render(Charge.of(event, credits_per_usd, cost)),
            )
        prices = DeploymentPrices(self._prices, bill.price_key) if bill.price_key else self._prices
        return self._ledger.charge(bill.on_ledger, usage, prices, credits_per_usd, lease=lease_id, answer=answer)

    async def charge(
        self,
        bill: RequestBill,
        usage: TokenUsage,
        render: Render | None = None,
        prefix: bytes = b"",
        content_type: str = "application/json",
        delivered: bool = False,
    ) -> tuple[Charge, bytes]:
        """Charge the actual cost and close the hold; returns once the charge is durable, with the
        answer ``render`` made of it (stored under the request's Idempotency-Key, after ``prefix``:
        the frames a stream already sent). ``delivered``: the client already has what it is charged
        for (a stream), so a charge the ledger cannot record now is owed, not forgotten."""
        charging = self._submit_charge(bill, usage, render, prefix, content_type)
        try:
            charged = await durable(charging)
        except asyncio.CancelledError:  # the request was cut off: the charge is made all the same
            self._used(bill, usage.prompt_tokens + usage.output_tokens)
            self._when_charged(bill, usage, charging)
            raise
        except (AlreadyCharged, HoldNotFound, RefusedByStore) as exc:
            return await self._charged_before(bill, exc, render, content_type)
        except LedgerUnavailable as exc:
            if delivered and self._owe(bill, usage):
                raise ChargeOwed(exc) from None
            self._settle_lease(bill, None)  # nothing was charged; the memory hold ends all the same
            self._closed(bill)
            raise
        except BaseException:
            self._closed(bill)
            raise
        self._settle_lease(bill, charged.lease_left)
        self._closed(bill, charged.event, usage)
        self._used(bill, usage.prompt_tokens + usage.output_tokens)
        charge = Charge.of(charged.event, self._credits_per_usd, charged.cost)
        if self.receipts is not None and charged.leaf is not None:
            receipt = signed_receipt(self.receipts, bill.principal.team_name, charged.event, charged.leaf)
            charge = dataclasses.replace(charge, receipt=receipt)
        if charged.answer is not None:  # rendered once, on the writer thread, and stored as sent
            # (a replay is this very answer, byte for byte: the receipt, which needs the leaf the
            # charge's own transaction gives, is in the head, x-tollgate-receipt, not in this body)
            return charge, charged.answer
        return charge, render(charge) if render is not None else b""

    async def _charged_before(
        self, bill: RequestBill, refused: Exception, render: Render | None, content_type: str
    ) -> tuple[Charge, bytes]:
        """The ledger refused the charge because the request, or its Idempotency-Key, was charged
        already (another process charged this stream as abandoned; a retry after a lost commit
        acknowledgement; another attempt under the key): the first charge stands, and is what the
        client is told. Anything else is a failure to charge."""
        p, idem = bill.principal, bill.idempotency
        duplicate_answer = isinstance(refused, RefusedByStore) and (refused.constraint or "").startswith(
            "idempotency_keys"
        )
        answer = await asyncio.to_thread(self._ledger.stored_answer, p.team_id, idem.key) if idem else None
        request_id = answer.request_id if duplicate_answer and answer is not None else bill.request_id
        record = await asyncio.to_thread(self._ledger.recorded_charge, p.team_id, request_id)
        if record is None:
            self._settle_lease(bill, None)
            self._closed(bill)
            raise ChargeNotRecorded(refused)
        if duplicate_answer:  # this attempt's own hold is still open: the key was charged once, by the other
            await self.release(bill, "answered under the same Idempotency-Key by another attempt")
        else:
            self._settle_lease(bill, None)
            self._closed(bill)
        log.warning("request %s was charged before (%s); answering with that charge", request_id, refused)
        charge = Charge.of(record, self._credits_per_usd)
        if answer is not None and content_type == "application/json":  # a stream's are its final frames
            return charge, answer.response
        return charge, render(charge) if render is not None else b""

    def charge_soon(self, bill: RequestBill, usage: TokenUsage, *, again: bool = False) -> None:
        """Queue a charge without waiting (for streams the client abandoned; ``again``: an owed one)."""
        future = self._submit_charge(bill, usage)
        if not again:
            self._used(bill, usage.prompt_tokens + usage.output_tokens)
        self._when_charged(bill, usage, future)

    def _when_charged(self, bill: RequestBill, usage: TokenUsage, charging: Future[Charged]) -> None:
        """Close the bill's books on this loop once ``charging`` is done, nobody awaiting it."""
        loop = asyncio.get_running_loop()

        def settled(done: Future[Charged]) -> None:
            error = done.exception()
            with contextlib.suppress(RuntimeError):  # the loop is gone: the process is stopping
                loop.call_soon_threadsafe(self._charged_soon, bill, usage, None if error else done.result(), error)

        charging.add_done_callback(settled)

    def _charged_soon(
        self, bill: RequestBill, usage: TokenUsage, charged: Charged | None, error: BaseException | None
    ) -> None:
        if isinstance(error, LedgerUnavailable) and self._owe(bill, usage):
            return
        self._settle_lease(bill, charged.lease_left if charged is not None else None)
        self._closed(bill, charged.event if charged is not None else None, usage)

    def _owe(self, bill: RequestBill, usage: TokenUsage) -> bool:
        """Keep the charge of an answer the client already has, which the ledger could not record,
        to submit again when it can be written (``pay_owed``). Its hold stays: a lease with a charge
        owed against it is not given back. If the process stops first, the lease expires like an
        abandoned hold and the request is never charged — once at most, never twice. Requests with an
        Idempotency-Key are not kept: their stored answer must go in with their charge."""
        if bill.idempotency is not None:
            return False
        self._owed.append((bill, usage))
        log.warning(
            "request %s: the ledger could not record its charge; it is charged when the ledger can be written again",
            bill.request_id,
        )
        if bill.record is not None:
            bill.record.failed("ledger unavailable: the charge is owed, and made when the ledger returns")
            bill.record.settled()
        return True

    @property
    def owed(self) -> int:
        return len(self._owed)

    def pay_owed(self) -> None:
        """Submit the owed charges again (on the event loop, once the ledger can be written)."""
        owed, self._owed = self._owed, []
        for bill, usage in owed:
            self.charge_soon(bill, usage, again=True)

    def release_soon(self, bill: RequestBill, reason: str) -> Future[Released]:
        """Queue the hold's release (nothing was delivered); awaitable with ``durable``."""
        self._used(bill, 0)
        if bill.lease is not None:  # the hold was in memory: end it, and record the request's failure
            lease_id = bill.lease.lease_id
            self._settle_lease(bill, None)
            future = self._ledger.record_failure(bill.on_ledger, lease_id, reason)
        else:
            future = self._ledger.release(bill.on_ledger, reason)
        loop = asyncio.get_running_loop()

        def released(_: Future[Released]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: the process is stopping
                loop.call_soon_threadsafe(self._closed, bill)

        future.add_done_callback(released)
        return future

    def _settle_lease(self, bill: RequestBill, lease_left: int | None) -> None:
        if self._leases is not None and bill.lease is not None:
            self._leases.settle(bill.lease, bill.held, lease_left)
            bill.lease, bill.held = None, 0

    async def release(self, bill: RequestBill, reason: str) -> None:
        # LedgerUnavailable: the hold stays open and visible; nothing was charged. HoldNotFound: it was
        # released already — this process was taken for dead meanwhile (cut off from the database, or
        # frozen), or the hold outlived its timeout — and there is nothing left to release (it was a
        # 500 for a request whose upstream had failed; the multi-host chaos suite found it).
        with contextlib.suppress(LedgerUnavailable, HoldNotFound):
            await durable(self.release_soon(bill, reason))
