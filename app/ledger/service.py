"""The ledger service: every command a team ledger takes, as a named, typed method over the writer.

In the manner of the eventsourcing library's example applications, each thing the gateway asks of
a team's ledger is one method with a name and a signature, and its answer one frozen dataclass
(``app/ledger/results.py``); the commands the gateway queues to the writer are written here and
nowhere else (tests, to force faults, and the ledger benchmark still queue raw ones). A refusal
is the domain's exception (``TeamSuspended``, ``InsufficientCredits``, …), never a way to return
a result: a request already served under its Idempotency-Key is a ``Held`` with its stored answer.

Two kinds of methods, because their callers differ:

- **The request path** (``hold``, ``charge``, ``release``, ``record_failure``, ``lease``,
  ``return_lease``, and the sweeper's ``release_expired``, ``release_abandoned``) answers a
  ``Future``: billing must not block the event loop, and must still see a command through when
  the request that queued it is cut off (the writer completes the future either way).
- **Administration** (teams, keys, credits, limits) waits for the answer and returns it, as the
  CLI and the admin API (from a worker thread) want it. Each command that changes something takes
  who gives it (``actor``: ``admin:<key id>``, ``admin:config``, ``cli:user@host``) and why
  (``reason``), which its events keep.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, TypeVar
from uuid import UUID

from app.keys import new_key
from app.ledger.results import (
    ANY_USE,
    NO_LIMITS,
    AlertSetting,
    AnswerToStore,
    BudgetSummary,
    Charged,
    Funds,
    Held,
    IssuedKey,
    KeySummary,
    KeyTerms,
    Leased,
    Limits,
    Released,
    ReleasedHolds,
    TeamSummary,
)
from app.ledger.writer import LedgerWriter, Recorded
from app.store.event_store import LedgerStore
from app.store.read_models import ChargeRecord, IdempotentResponse
from domain.alerts import Threshold
from domain.attribution import Attribution
from domain.auto_recharge import Recharge, RechargeSetting
from domain.credit_lots import PAID_FOREVER, SETTLES_WITHIN, LotTerms
from domain.ledger import (
    TEAM_NAME,
    Delivery,
    InvalidTeamName,
    RequestInProgress,
    TeamAlreadyExists,
    TeamLedger,
    team_id,
)
from domain.ledger_holds import BatchLine, RequestOnLedger
from domain.prices import PriceSource
from domain.pricing import Price
from domain.rerates import RerateScope
from domain.usage import TokenUsage

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class TeamRequest:
    """A request as the ledger records it: which team pays, under which request id, for which key,
    model and endpoint."""

    team_id: UUID
    team_name: str
    request_id: str
    key_id: str
    model: str
    endpoint: str
    #: Who the request is attributed to (``x-tollgate-tags``, and the end user the client named).
    tags: Mapping[str, str] = field(default_factory=dict)
    end_user: str = ""

    @property
    def on_team(self) -> RequestOnLedger:
        """The request as its team's ledger records it."""
        return RequestOnLedger(
            self.request_id, self.key_id, self.model, self.endpoint, Attribution(self.tags, self.end_user)
        )


def thresholds_of(ledger: TeamLedger) -> list[Threshold]:
    return sorted((Threshold.from_record(t) for t in ledger.alert_thresholds.values()), key=lambda t: t.name)


class LedgerService:
    """The team ledgers' commands and reads, over one process's ledger writer."""

    def __init__(self, writer: LedgerWriter, settles_within: float = SETTLES_WITHIN) -> None:
        self._writer = writer
        #: How long a request held now could take to settle at the latest (``hold_timeout``): a hold
        #: or lease never counts on credit that expires sooner.
        self.settles_within = settles_within

    @property
    def store(self) -> LedgerStore:
        return self._writer.store

    # -- the request path: answers are futures, completed once durable (or refused) --------------

    def hold(self, request: TeamRequest, amount: int, *, owner: str, idem_key: str = "") -> Future[Held]:
        """Reserve ``amount`` for ``request`` on behalf of gateway process ``owner``. Under an
        Idempotency-Key (``idem_key``) a request served before is answered with its stored answer
        instead (no hold), and a retry while another attempt runs is refused (``RequestInProgress``).
        The stored answer is looked up on the writer thread, against the very team state the hold is
        decided on, so no retry can slip between a charge and its stored answer."""

        def place(team: TeamLedger) -> Held:
            if idem_key:
                if self._writer.answer_pending(team.id, idem_key):  # answered in this very batch
                    raise RequestInProgress(team.name, request.request_id)
                answer = self.store.find_idempotent(team.id, idem_key)
                if answer is not None:
                    return Held(team.available, answer)
            return Held(
                team.place_hold(
                    request.on_team, amount, owner=owner, idem_key=idem_key, settles_within=self.settles_within
                )
            )

        return self._writer.on_team(request.team_id, request.team_name, place)

    def charge(
        self,
        request: TeamRequest,
        usage: TokenUsage,
        price: Price | PriceSource,
        credits_per_usd: Decimal,
        *,
        lease: str = "",
        answer: AnswerToStore | None = None,
    ) -> Future[Charged]:
        """Charge what ``usage`` cost at ``price`` (the price list: the entry in force as the charge is
        recorded) and close the request's hold (or charge it against
        ``lease``, its credit lease); with ``answer``, store the answer rendered from the charge under
        the request's Idempotency-Key in the same transaction."""

        def charge(team: TeamLedger) -> Recorded[Charged]:
            event, cost = team.charge_priced(request.on_team, usage, price, credits_per_usd, lease=lease)
            lease_left = team.held_for(lease) if lease else None
            if answer is None:
                return Recorded(Charged(event, lease_left, cost=cost))
            body = answer.render(event, cost)
            now = datetime.now(UTC)
            stored = IdempotentResponse(
                team.id,
                answer.idem_key,
                answer.body_hash,
                request.request_id,
                answer.content_type,
                answer.prefix + body,
                now.isoformat(),
                now.timestamp() + answer.ttl,
            )
            return Recorded(Charged(event, lease_left, body, cost), (stored,))

        return self._writer.on_team_recording(request.team_id, request.team_name, charge)

    def release(self, request: TeamRequest, reason: str) -> Future[Released]:
        """Close the request's hold without charging: nothing was delivered."""
        return self._writer.on_team(
            request.team_id, request.team_name, lambda team: Released(team.release_hold(request.request_id, reason))
        )

    def record_failure(self, request: TeamRequest, lease: str, reason: str) -> Future[Released]:
        """Record that a request held in memory against ``lease`` failed, uncharged (its hold ended in
        the process's memory; the ledger keeps the failure for the audit history)."""

        def record(team: TeamLedger) -> Released:
            team.record_failure(request.request_id, lease, request.key_id, request.model, request.endpoint, reason)
            return Released(team.available)

        return self._writer.on_team(request.team_id, request.team_name, record)

    def lease(self, team: UUID, team_name: str, lease: str, needed: int, wanted: int, owner: str) -> Future[Leased]:
        """Grow gateway process ``owner``'s credit lease by at least ``needed``, up to ``wanted``."""
        return self._writer.on_team(
            team,
            team_name,
            lambda ledger: Leased(ledger.lease_credits(lease, needed, wanted, owner, self.settles_within)),
        )

    def return_lease(self, team: UUID, team_name: str, lease: str) -> Future[None]:
        """Give what is left of a credit lease back to the team's available balance."""
        return self._writer.on_team(team, team_name, lambda ledger: ledger.return_lease(lease))

    def release_expired(self, team: UUID, team_name: str, now: float, timeout: float) -> Future[ReleasedHolds]:
        """Release the team's holds placed more than ``timeout`` seconds before ``now``."""
        return self._writer.on_team(
            team, team_name, lambda ledger: ReleasedHolds(tuple(ledger.release_expired(now, timeout)))
        )

    def release_abandoned(
        self,
        team: UUID,
        team_name: str,
        owners: Collection[str],
        delivered: Sequence[Delivery],
        prices: Mapping[str, Price] | PriceSource | None,
        credits_per_usd: Decimal,
    ) -> Future[ReleasedHolds]:
        """Gateway processes ``owners`` died: charge what their streams had ``delivered``, then release
        every hold and lease they had on the team."""
        return self._writer.on_team(
            team,
            team_name,
            lambda ledger: ReleasedHolds(tuple(ledger.release_abandoned(owners, delivered, prices, credits_per_usd))),
        )

    # -- batches: one hold for the batch, a charge for each line, the rest released ------------------

    def submit_batch(self, batch: TeamRequest, amount: int, *, idem_key: str = "") -> Future[Held]:
        """Hold ``amount`` (every line's worst case at the batch price) for the batch until it settles.
        Under an Idempotency-Key (``idem_key``), as :meth:`hold`: a batch made before under the key is
        answered with the answer kept then (no hold), and another attempt while the key's batch is
        still being made is refused (``RequestInProgress``)."""

        def submit(team: TeamLedger) -> Held:
            if idem_key:
                if self._writer.answer_pending(team.id, idem_key):
                    raise RequestInProgress(team.name, batch.request_id)
                answer = self.store.find_idempotent(team.id, idem_key)
                if answer is not None:
                    return Held(team.available, answer)
            return Held(team.submit_batch(batch.on_team, amount, idem_key=idem_key))

        return self._writer.on_team(batch.team_id, batch.team_name, submit)

    def keep_answer(self, answer: IdempotentResponse) -> IdempotentResponse | None:
        """Keep the answer to a request that charged nothing when it was served (a batch made, a file
        stored) under its Idempotency-Key, unless the key has one already; the key's answer
        afterwards (a write; it blocks). A batch's hold, placed under the key, keeps other attempts
        out until this is kept; a file's attempts race here, and the first kept wins."""
        return self.store.read_models.keep_idempotent(answer)

    def charge_batch_line(
        self, batch: TeamRequest, line: BatchLine, price: Price | PriceSource, credits_per_usd: Decimal
    ) -> Future[Charged]:
        """Charge one line of the batch from its own usage at the batch price, against the batch's hold."""

        def charge(team: TeamLedger) -> Recorded[Charged]:
            event, cost = team.charge_batch_line(batch.on_team, line, price, credits_per_usd)
            return Recorded(Charged(event, team.held_for(batch.request_id), cost=cost))

        return self._writer.on_team_recording(batch.team_id, batch.team_name, charge)

    def settle_batch(self, batch: TeamRequest, status: str) -> Future[int]:
        """Release what the batch's hold still holds (its lines are charged); what was released."""
        return self._writer.on_team(
            batch.team_id, batch.team_name, lambda team: team.settle_batch(batch.request_id, status)
        )

    def stored_answer(self, team: UUID, idem_key: str) -> IdempotentResponse | None:
        """The answer stored under an Idempotency-Key of the team, if any (a read; it blocks)."""
        return self.store.find_idempotent(team, idem_key)

    def recorded_charge(self, team: UUID, request_id: str) -> ChargeRecord | None:
        """The request's recorded charge, if it was charged (a read; it blocks)."""
        return self.store.find_charge(team, request_id)

    # -- administration: each waits until its command is durable ------------------------------

    def create_team(
        self, name: str, opening_balance: int, limits: Limits = NO_LIMITS, *, actor: str = "", reason: str = ""
    ) -> TeamSummary:
        """Open a team with ``opening_balance`` (micro-credits) and optional rate limits."""
        if not TEAM_NAME.fullmatch(name):
            raise InvalidTeamName(name)

        def command(team: TeamLedger | None) -> tuple[TeamLedger, Recorded[TeamSummary]]:
            if team is not None:
                raise TeamAlreadyExists(name)
            team = TeamLedger.open(name, actor=actor, reason=reason)
            if opening_balance:
                team.add_credits(opening_balance, reference="opening balance", actor=actor, reason=reason)
            if limits.given:
                team.limit(*limits.merged(None, None), actor=actor, reason=reason)
            return team, Recorded(TeamSummary.of(team))

        return self._writer.submit(team_id(name), command).result()

    def top_up(
        self,
        team: str,
        amount: int,
        reference: str = "",
        *,
        actor: str = "",
        reason: str = "",
        terms: LotTerms = PAID_FOREVER,
    ) -> TeamSummary:
        """Add ``amount`` micro-credits to a team, as a lot on ``terms`` (its kind, expiry, priority)."""

        def top_up(ledger: TeamLedger) -> TeamSummary:
            ledger.add_credits(amount, reference, actor=actor, reason=reason, terms=terms)
            return TeamSummary.of(ledger)

        return self._on(team, top_up)

    def issue_key(
        self, team: str, label: str = "", terms: KeyTerms = ANY_USE, *, actor: str = "", reason: str = ""
    ) -> IssuedKey:
        """Issue a key for a team (optionally only for some models or endpoints, with rate limits:
        its ``terms``); the answer carries its secret, the only time it is seen."""
        key = new_key()
        models, endpoints, limits = terms.models, terms.endpoints, terms.limits

        def issue(ledger: TeamLedger) -> IssuedKey:
            ledger.issue_key(key.key_id, key.key_hash, label, actor=actor, reason=reason)
            if models:
                ledger.restrict_key(key.key_id, models, actor=actor, reason=reason)
            if endpoints:
                ledger.restrict_key_endpoints(key.key_id, endpoints, actor=actor, reason=reason)
            if limits.given:
                ledger.limit_key(key.key_id, *limits.merged(None, None), actor=actor, reason=reason)
            return IssuedKey(key.key_id, key.secret)

        return self._on(team, issue)

    def revoke_key(self, team: str, key_id: str, *, actor: str = "", reason: str = "") -> None:
        self._on(team, lambda ledger: ledger.revoke_key(key_id, actor=actor, reason=reason))

    def restrict_key(self, team: str, key_id: str, models: list[str], *, actor: str = "", reason: str = "") -> None:
        """Let the key use only ``models`` (none: any model)."""
        self._on(team, lambda ledger: ledger.restrict_key(key_id, models, actor=actor, reason=reason))

    def restrict_key_endpoints(
        self, team: str, key_id: str, endpoints: list[str], *, actor: str = "", reason: str = ""
    ) -> None:
        """Let the key call only ``endpoints`` (none: any endpoint)."""
        self._on(team, lambda ledger: ledger.restrict_key_endpoints(key_id, endpoints, actor=actor, reason=reason))

    def limit_key(self, team: str, key_id: str, limits: Limits, *, actor: str = "", reason: str = "") -> KeySummary:
        """Set the key's own rate limits (a limit not given stays as it is)."""

        def limit(ledger: TeamLedger) -> KeySummary:
            key = ledger.keys.get(key_id)
            rpm, tpm = (key.rpm, key.tpm) if key is not None else (None, None)
            ledger.limit_key(key_id, *limits.merged(rpm, tpm), actor=actor, reason=reason)
            return KeySummary.of(ledger, key_id)

        return self._on(team, limit)

    def limit_team(self, team: str, limits: Limits, *, actor: str = "", reason: str = "") -> TeamSummary:
        """Set the team's rate limits, shared by its keys (a limit not given stays as it is)."""

        def limit(ledger: TeamLedger) -> TeamSummary:
            ledger.limit(*limits.merged(ledger.rpm, ledger.tpm), actor=actor, reason=reason)
            return TeamSummary.of(ledger)

        return self._on(team, limit)

    def suspend(self, team: str, reason: str = "", *, actor: str = "") -> TeamSummary:
        """Refuse the team's requests until it is reinstated."""

        def suspend(ledger: TeamLedger) -> TeamSummary:
            ledger.suspend(reason, actor=actor)
            return TeamSummary.of(ledger)

        return self._on(team, suspend)

    def reinstate(self, team: str, *, actor: str = "", reason: str = "") -> TeamSummary:
        def reinstate(ledger: TeamLedger) -> TeamSummary:
            ledger.reinstate(actor=actor, reason=reason)
            return TeamSummary.of(ledger)

        return self._on(team, reinstate)

    def adjust_credits(
        self, team: str, amount: int, reason: str, reference: str = "", *, actor: str = ""
    ) -> TeamSummary:
        """Give ``amount`` micro-credits back (> 0) or take them (< 0) as a correction, saying why."""

        def adjust(ledger: TeamLedger) -> TeamSummary:
            ledger.adjust_credits(amount, reason, reference, actor=actor)
            return TeamSummary.of(ledger)

        return self._on(team, adjust)

    def apply_rerate(
        self,
        team: str,
        scope: RerateScope,
        lines: Sequence[tuple[str, str, int]],
        *,
        through_version: int | None,
        actor: str = "",
        reason: str = "",
    ) -> list[int]:
        """Record the re-rate ``scope`` and its adjustments ``(model, key id, amount)`` in one
        transaction, unless it overlaps an applied one (``TeamLedger.apply_rerate``); returns what each moved."""
        return self._on(
            team,
            lambda ledger: ledger.apply_rerate(
                scope, lines, through_version=through_version, actor=actor, reason=reason
            ),
        )

    def rerates(self, team: str) -> dict[str, dict[str, Any]]:
        """The team's applied re-rates (reference → period, models, when and by whom), as committed."""
        return self._on(team, self._caught_up(lambda ledger: dict(ledger.rerates)))

    def adjust_prices(
        self, team: str, percent: Decimal, model: str = "", reason: str = "", *, actor: str = ""
    ) -> dict[str, str]:
        """Price the team's requests ``percent`` above (below, if negative) the price list, for
        ``model`` or every model; returns the team's adjustments after it."""

        def adjust(ledger: TeamLedger) -> dict[str, str]:
            ledger.adjust_prices(percent, model, reason, actor=actor)
            return dict(ledger.price_adjustments)

        return self._on(team, adjust)

    def clamp_output(self, team: str, enabled: bool, key_id: str = "", *, actor: str = "", reason: str = "") -> None:
        """Give a request the balance cannot cover what it covers instead of a 402, for the key or
        (no key) for the whole team."""
        self._on(team, lambda ledger: ledger.clamp_outputs(enabled, key_id, actor=actor, reason=reason))

    def set_budget(
        self, team: str, limit: int | None, period: str, key_id: str = "", *, actor: str = "", reason: str = ""
    ) -> BudgetSummary | None:
        """Let the key (no key: the whole team) spend at most ``limit`` micro-credits per ``period``
        (None lifts it); returns where the budget stands now."""

        def set_it(ledger: TeamLedger) -> BudgetSummary | None:
            ledger.set_budget(limit, period, key_id, actor=actor, reason=reason)
            return BudgetSummary.of(ledger, key_id, ledger.now())

        return self._on(team, set_it)

    def budget(self, team: str, key_id: str = "") -> BudgetSummary | None:
        """Where the key's (no key: the team's) budget stands now, as committed by every process."""
        return self._on(team, self._caught_up(lambda ledger: BudgetSummary.of(ledger, key_id, ledger.now())))

    def set_alert(self, team: str, alert: AlertSetting, *, actor: str = "", reason: str = "") -> list[Threshold]:
        """Set (or, ``enabled`` False, remove) an alert threshold; returns the team's thresholds."""

        def set_it(ledger: TeamLedger) -> list[Threshold]:
            ledger.set_alert(alert.kind, alert.value, alert.key_id, enabled=alert.enabled, actor=actor, reason=reason)
            return thresholds_of(ledger)

        return self._on(team, set_it)

    def alert_thresholds(self, team: str) -> list[Threshold]:
        """The team's alert thresholds, as committed by every process."""
        return self._on(team, self._caught_up(thresholds_of))

    def team_summary(self, team: str) -> TeamSummary:
        """The team's balance, holds, limits and state, as committed by every process."""
        return self._on(team, self._caught_up(TeamSummary.of))

    def funds(self, team: str) -> Funds:
        """The team's balance and open holds, as committed by every process, and what it ever spent
        (read from the once-only charge index up to the same version, off the writer thread)."""
        funds = self._on(team, self._caught_up(Funds.of))
        _, spent = self.store.read_models.charge_totals(team_id(team), funds.version)
        return dataclasses.replace(funds, spent=spent)

    def list_keys(self, team: str) -> list[KeySummary]:
        """The team's keys, as committed by every process."""
        return self._on(team, self._caught_up(lambda ledger: [KeySummary.of(ledger, k) for k in ledger.keys]))

    def auto_recharge(self, team: str) -> Recharge | None:
        """The team's auto-recharge settings and where they stand (None: never set)."""
        return self._on(team, self._caught_up(lambda ledger: ledger.recharge))

    def set_auto_recharge(self, team: str, setting: RechargeSetting, *, actor: str = "", reason: str = "") -> Recharge:
        """Set the team's auto-recharge (or turn it off); returns it as it stands now."""

        def command(ledger: TeamLedger) -> Recharge:
            ledger.set_auto_recharge(
                setting.threshold,
                setting.target,
                setting.monthly_cap,
                enabled=setting.enabled,
                actor=actor,
                reason=reason,
            )
            assert ledger.recharge is not None
            return ledger.recharge

        return self._on(team, command)

    def recharge_facts(self, team: str) -> tuple[str, list[str]]:
        """The team's pending auto-recharge attempt (``""``: none) and its payments' ids, newest first
        and not disputed (where a saved card may be found), as committed by every process."""

        def facts(ledger: TeamLedger) -> tuple[str, list[str]]:
            pending = ledger.recharge.pending if ledger.recharge is not None else ""
            paid = [pi for pi, payment in reversed(ledger.payments.items()) if not payment.disputed]
            return pending, paid

        return self._on(team, self._caught_up(facts))

    def recharge_failed(self, team: str, attempt: str, why: str) -> bool:
        """Record that the attempt's payment failed (once; on the team as every process committed it,
        so an attempt begun elsewhere is found pending); whether auto-recharge is still on."""
        return self._on(team, self._caught_up(lambda ledger: ledger.recharge_failed(attempt, why)))

    def command(self, team: str, action: Callable[[TeamLedger], R]) -> R:
        """Run ``action`` on the team in the writer (its events saved with the batch); the team must exist."""
        return self._on(team, action)

    def _on(self, team: str, action: Callable[[TeamLedger], R]) -> R:
        return self._writer.on_team(team_id(team), team, action).result()

    def _caught_up(self, read: Callable[[TeamLedger], R]) -> Callable[[TeamLedger], R]:
        """``read``, on the team brought up to date first. The writer's copy of a team learns what
        other processes appended (a top-up from the CLI, another gateway's charges) only when one of
        its own saves conflicts; a command that only reads saves nothing, so without this it would
        answer from a stale copy. The caught-up copy then replaces the writer's (it has no events of
        its own to save). A team this batch already changed is left alone: its save will conflict,
        and the batch, this read included, is decided again on the caught-up copy."""

        def caught_up(ledger: TeamLedger) -> R:
            if not ledger.pending_events:
                for event in self.store.newer_events(ledger):
                    event.mutate(ledger)
            return read(ledger)

        return caught_up
