"""Matching what each client was told with the charges the ledger recorded, request by request.

The request id an answer carries is the one its charge records, so every attempt is looked up by
it. What must hold, and how exactly:

* a 200 or a complete stream: exactly one ``Charged``, debiting exactly the reported cost (the
  answer's ``usage.cost.credits`` × 1,000,000, read as a decimal), leaving exactly the reported
  balance, for exactly the reported tokens — checked exactly;
* a stream the upstream broke off or failed mid-way: if text was delivered, exactly one charge,
  for exactly the tokens of the text the client received (the model's tokenizer, as documented)
  and at most the request's hold (its worst case); if none was, no charge and a recorded failure —
  checked exactly;
* a stream whose charge the ledger could not record (the database was away) is charged once the
  database is back, exactly once — unless its process died first; checked exactly, but for that;
* a stream cut off by the death of its gateway: at most one charge, at most its hold — only
  bounded, since the dead process may or may not have recorded it before dying;
* a stream of a host frozen or cut off from the database (the multi-host suite) that the others
  took for dead: charged by them for what it had delivered at its last heartbeat, so at most the
  tokens the client received, never more — bounded, and each such shortfall reported;
* any other answer (4xx, 5xx): no charge;
* an Idempotency-Key's attempts and replays share one request id and one charge, and a replay
  reports the very cost of the original;
* a charge nobody was told about is allowed only for requests that never got an answer at all
  (their request id is unknown), at most one per such request of the same team.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from decimal import Decimal
from typing import TYPE_CHECKING, cast

from scripts.chaos.client import ANSWERED, BROKEN, COMPLETE, ERROR_EVENT, NO_ANSWER, Attempt
from scripts.chaos.faults import KILL
from scripts.chaos.host_faults import DATABASE_CUT, FREEZE

if TYPE_CHECKING:  # the gateway's own modules load only when prices are asked for
    from app.tokens import Protocol
    from app.tokens.counting import Rules
    from domain.settings import Model, Settings
from scripts.chaos.gateways import MODELS
from scripts.chaos.ledger import LedgerEvent, Snapshot
from scripts.chaos.record import RunRecord
from scripts.chaos.traffic import MAX_TOKENS, Plan
from scripts.chaos.verdict import Verdict

OWED = "charged once it can be written again"
_WIRES = {"openai": "chat", "openai-responses": "responses", "anthropic": "messages"}


class Prices:
    """The hold and the delivered tokens of a request, by the gateway's documented rules."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def _model(self, model_id: str) -> Model:
        model = self._settings.model(model_id)
        if model is None:
            raise KeyError(f"the chaos configuration has no model {model_id!r}")
        return model

    def _rules(self, model_id: str) -> Rules:
        from app.tokens import rules_for

        return rules_for(None, _WIRES[MODELS[model_id]])

    def hold(self, plan: Plan) -> int:
        from app.tokens import prompt_tokens
        from domain.pricing import worst_case_in_micros

        rules = self._rules(plan.model)
        prompt = prompt_tokens(plan.body(), cast("Protocol", plan.endpoint), rules)  # chat, responses or messages
        return worst_case_in_micros(
            prompt, MAX_TOKENS, self._model(plan.model).price, Decimal(self._settings.credits_per_usd)
        )

    def output_tokens(self, plan: Plan, text: str) -> int:
        return self._rules(plan.model).text(text)


def _attempts_under_keys(snapshot: Snapshot) -> dict[tuple[str, str], set[str]]:
    """Every request id that held credit under an Idempotency-Key, by (team, key): each attempt under
    a key has a request id of its own (``HoldPlaced.idem_key`` names the key), and whatever any of them
    was charged is what the key's request cost — even an attempt whose client never learnt its id."""
    ids: dict[tuple[str, str], set[str]] = defaultdict(set)
    for event in snapshot.of_kind("HoldPlaced"):
        if event.get("idem_key"):
            ids[(event.team, event["idem_key"])].add(event["request_id"])
    return ids


def _index(snapshot: Snapshot, kind: str) -> dict[str, list[LedgerEvent]]:
    found: dict[str, list[LedgerEvent]] = defaultdict(list)
    for event in snapshot.of_kind(kind):
        found[event["request_id"]].append(event)
    return found


def _input_tokens(event: LedgerEvent) -> int:
    usage = event["usage"]
    return int(usage["input_tokens"] + usage["cache_write_tokens"] + usage["cache_hit_tokens"])


class ChargeChecks:
    def __init__(self, record: RunRecord, snapshot: Snapshot, prices: Prices, verdict: Verdict) -> None:
        self.plans = record.plans
        self.teams = record.teams
        self.prices = prices
        self.verdict = verdict
        self.charged = _index(snapshot, "Charged")
        self.failed = _index(snapshot, "RequestFailed")
        self.released = _index(snapshot, "HoldReleased")
        self.under_key = _attempts_under_keys(snapshot)
        self.kills = [f for f in record.faults if f.kind == KILL]
        self.taken_for_dead = [f for f in record.faults if f.kind in (FREEZE, *DATABASE_CUT)]
        self.by_plan: dict[int, list[Attempt]] = defaultdict(list)
        for attempt in record.attempts:
            self.by_plan[attempt.plan].append(attempt)
        self.seen: set[str] = set()
        self.unknown: Counter[str] = Counter()  # team → attempts that got no answer (and no request id)

    def run(self) -> None:
        for plan in self.plans:
            attempts = self.by_plan.get(plan.index, [])
            if plan.idempotency_key:
                self._idempotent(plan, attempts)
            else:
                for attempt in attempts:
                    self._plain(plan, attempt)
        self._unmatched()

    # -- helpers ------------------------------------------------------------------------------

    def _fail(self, check: str, plan: Plan, attempt: Attempt | None, detail: str) -> None:
        where = (
            f"request #{plan.index} ({plan.endpoint}, {plan.model}, {'stream' if plan.stream else 'plain'}, "
            f"fault {plan.fault or 'none'}, team {self.teams[plan.team].name}"
        )
        if attempt is not None:
            where += (
                f", attempt {attempt.number} on gateway {attempt.gateway} pid {attempt.pid}, "
                f"id {attempt.request_id or '-'}, status {attempt.status}, {attempt.outcome}"
            )
        self.verdict.fail(check, f"{where}): {detail}")

    def _died_after(self, attempt: Attempt) -> bool:
        """Whether the process that served ``attempt`` was killed after it began."""
        return any(k.pid == attempt.pid and k.started >= attempt.started for k in self.kills)

    def _charges(self, request_id: str) -> list[LedgerEvent]:
        self.seen.add(request_id)
        return self.charged.get(request_id, [])

    def _exact(self, plan: Plan, attempt: Attempt, charge: LedgerEvent) -> None:
        """The charge is exactly what the answer reported."""
        self.verdict.charges_checked += 1
        problems = []
        if attempt.cost_micros != charge["charged"]:
            problems.append(f"reported cost {attempt.cost} credits but charged {charge['charged']} micro-credits")
        if charge["charged"] != charge["cost"] and not self._uncollected_after_release(attempt, charge):
            problems.append(f"charged {charge['charged']} of a cost of {charge['cost']}")
        if attempt.remaining_micros is not None and attempt.remaining_micros != charge["balance_after"]:
            problems.append(f"reported remaining {attempt.remaining} but the charge left {charge['balance_after']}")
        money_agrees = not problems
        if attempt.output_tokens is not None and attempt.output_tokens != charge["usage"]["output_tokens"]:
            problems.append(
                f"reported {attempt.output_tokens} output tokens, charged {charge['usage']['output_tokens']}"
            )
        if attempt.input_tokens is not None and attempt.input_tokens != _input_tokens(charge):
            problems.append(f"reported {attempt.input_tokens} input tokens, charged {_input_tokens(charge)}")
        if problems and money_agrees and self._charged_by_the_others(plan, attempt, charge):
            self.verdict.note(
                f"a stream of a host taken for dead, charged by the others for the text it delivered, by the "
                f"gateway's own count (documented): request #{plan.index} id {attempt.request_id}: "
                + "; ".join(problems)
            )
        elif problems:
            self._fail("charge differs from the answer", plan, attempt, "; ".join(problems))

    def _uncollected_after_release(self, attempt: Attempt, charge: LedgerEvent) -> bool:
        """Whether a charge took less than its cost because its hold was gone: its host was taken for
        dead meanwhile and its holds released, so the charge came out of what the team had available,
        and the rest is recorded as uncollected (never an overspend; the answer reports what was taken)."""
        if not self._taken_for_dead(attempt) or charge["charged"] > charge["cost"]:
            return False
        if charge["uncollected"] != charge["cost"] - charge["charged"]:
            return False
        self.verdict.note(
            f"a charge of a host taken for dead, its hold released first, took what the team had: "
            f"{charge['charged']} of {charge['cost']}, {charge['uncollected']} uncollected (documented): "
            f"id {attempt.request_id}"
        )
        return True

    def _charged_by_the_others(self, plan: Plan, attempt: Attempt, charge: LedgerEvent) -> bool:
        """Whether a stream's charge is the one the other processes make for a process they took for
        dead: its host frozen or cut off meanwhile, the text delivered counted as the gateway counts
        it (not the upstream's own report), at most the hold — and the answer reported that charge's
        cost (checked by the caller)."""
        return (
            plan.stream
            and self._taken_for_dead(attempt)
            and charge["usage"]["output_tokens"] <= self.prices.output_tokens(plan, attempt.text)
            and charge["charged"] <= self.prices.hold(plan)
        )

    def _taken_for_dead(self, attempt: Attempt) -> bool:
        """Whether the attempt's host was frozen, or cut off from the database, while it ran: the
        others may have taken its process for dead and charged its streams for what they had
        delivered at its last heartbeat."""
        return any(
            f.victim == attempt.gateway and f.started <= attempt.ended and attempt.started <= f.ended
            for f in self.taken_for_dead
        )

    def _partial(self, plan: Plan, attempt: Attempt, charge: LedgerEvent) -> None:
        """A stream charged for what it delivered: exactly the tokens of the text received, at most the
        hold. Its host taken for dead meanwhile: at most those tokens (the bound of the guarantees:
        what it delivered after its last heartbeat is not charged), never more."""
        self.verdict.charges_checked += 1
        expected = self.prices.output_tokens(plan, attempt.text)
        hold = self.prices.hold(plan)
        charged_tokens = charge["usage"]["output_tokens"]
        if charged_tokens < expected and self._taken_for_dead(attempt):
            self.verdict.note(
                f"a stream of a host taken for dead charged for what it had delivered at its last heartbeat "
                f"(documented bound): request #{plan.index} id {attempt.request_id}, {charged_tokens} of "
                f"{expected} tokens"
            )
        elif charged_tokens != expected:
            self._fail(
                "cut stream charged for other than what it delivered",
                plan,
                attempt,
                f"delivered {attempt.text!r} ({expected} tokens) but charged {charge['usage']['output_tokens']}",
            )
        if charge["charged"] > hold:
            self._fail("charged more than the hold", plan, attempt, f"charged {charge['charged']} > hold {hold}")

    def _bounded(self, plan: Plan, attempt: Attempt, charges: list[LedgerEvent]) -> None:
        """A stream cut off by its gateway's death: at most one charge, at most the hold."""
        if len(charges) > 1:
            self._fail("charged twice", plan, attempt, f"{len(charges)} charges: {[c.position for c in charges]}")
        for charge in charges:
            self.verdict.charges_checked += 1
            if charge["charged"] > self.prices.hold(plan):
                self._fail("charged more than the hold", plan, attempt, f"charged {charge['charged']}")

    # -- requests without an Idempotency-Key: one attempt, one request id ----------------------

    def _plain(self, plan: Plan, attempt: Attempt) -> None:
        if not attempt.request_id:
            self.unknown[self.teams[plan.team].name] += 1
            return None
        charges = self._charges(attempt.request_id)
        if attempt.status == 200 and attempt.outcome in (ANSWERED, COMPLETE):
            if len(charges) != 1:
                return self._fail("answered but not charged exactly once", plan, attempt, f"{len(charges)} charges")
            return self._exact(plan, attempt, charges[0])
        if attempt.status == 200 and attempt.outcome == ERROR_EVENT:
            return self._cut(plan, attempt, charges)
        if attempt.outcome in (BROKEN, NO_ANSWER):  # its gateway died (answers.py judges any other cause)
            return self._bounded(plan, attempt, charges)
        if charges:
            self._fail("refused but charged", plan, attempt, f"{len(charges)} charge(s): {attempt.error[:120]!r}")

    def _cut(self, plan: Plan, attempt: Attempt, charges: list[LedgerEvent]) -> None:
        """A stream that ended with an in-stream error."""
        if OWED in attempt.error:
            if len(charges) == 1:
                return self._partial(plan, attempt, charges[0])
            if not charges and self._died_after(attempt):
                self.verdict.note(
                    f"an owed charge lost with its process (documented): request #{plan.index} id {attempt.request_id}"
                )
                return None
            return self._fail("owed charge not made exactly once", plan, attempt, f"{len(charges)} charges")
        if "ledger is unavailable" in attempt.error:  # the charge could not be recorded and is not owed
            if charges:
                self._fail("told uncharged but charged", plan, attempt, f"{len(charges)} charges")
            return None
        if attempt.text:
            if len(charges) != 1:
                return self._fail(
                    "cut stream with text not charged exactly once",
                    plan,
                    attempt,
                    f"{len(charges)} charges; delivered {attempt.text!r}",
                )
            return self._partial(plan, attempt, charges[0])
        if charges:
            return self._fail("cut stream without text charged", plan, attempt, f"{len(charges)} charges")
        if not self.failed.get(attempt.request_id) and not self.released.get(attempt.request_id):
            self._fail("cut stream without text left no failure in the ledger", plan, attempt, attempt.error[:120])

    # -- requests with an Idempotency-Key: one request, however many attempts ------------------

    def _never_held(self, plan: Plan, attempts: list[Attempt], held: set[str]) -> None:
        """Attempts never held under the key were refused before billing (409 while another attempt
        runs, a 402, a revoked key, the rate-limit store away), so never charged; an answer (a 200,
        first or replayed) always carries the id of an attempt that held under the key."""
        for attempt in attempts:
            if attempt.request_id and attempt.request_id not in held:
                if attempt.status == 200:
                    self._fail(
                        "an Idempotency-Key's answer under a request that never held under it",
                        plan,
                        attempt,
                        f"held under the key: {sorted(held)}",
                    )
                elif self._charges(attempt.request_id):
                    self._fail("refused but charged", plan, attempt, attempt.error[:120])

    def _replays(
        self, plan: Plan, replays: list[Attempt], original: Attempt | None, charges: list[LedgerEvent]
    ) -> None:
        """Each replayed answer is the original's, cost and remaining credit included."""
        for attempt in replays:
            if original is None:
                if not charges:
                    self._fail("a replay of an answer never charged", plan, attempt, f"reported {attempt.cost}")
                continue
            if (attempt.cost, attempt.remaining) != (original.cost, original.remaining):
                self._fail(
                    "replay differs from the original",
                    plan,
                    attempt,
                    f"cost/remaining {attempt.cost}/{attempt.remaining} vs {original.cost}/{original.remaining}",
                )
            elif not plan.stream and attempt.body != original.body:
                self._fail("replay differs from the original", plan, attempt, "the stored answer is not byte for byte")

    def _idempotent(self, plan: Plan, attempts: list[Attempt]) -> None:
        held = self.under_key.get((self.teams[plan.team].name, plan.idempotency_key), set())
        self._never_held(plan, attempts, held)
        charges = [charge for request_id in sorted(held) for charge in self._charges(request_id)]
        originals = [a for a in attempts if a.status == 200 and a.outcome in (ANSWERED, COMPLETE) and not a.replayed]
        replays = [a for a in attempts if a.status == 200 and a.outcome in (ANSWERED, COMPLETE) and a.replayed]
        partial = [
            a
            for a in attempts
            if a.status == 200 and a.outcome == ERROR_EVENT and a.text and "ledger is unavailable" not in a.error
        ]
        broken = [a for a in attempts if a.outcome in (BROKEN, NO_ANSWER)]
        if len(originals) > 1:
            return self._fail(
                "one Idempotency-Key served twice", plan, originals[1], f"{len(originals)} original answers"
            )
        low = len(originals) + len(partial)
        if not (low <= len(charges) <= low + len(broken)):
            return self._fail(
                "idempotent request not charged once",
                plan,
                attempts[-1],
                f"{len(charges)} charges for {len(originals)} answer(s), {len(partial)} cut stream(s) "
                f"and {len(broken)} broken attempt(s)",
            )
        unmatched = list(charges)
        for attempt in originals:
            match = [c for c in unmatched if c["charged"] == attempt.cost_micros]
            if not match:
                return self._fail(
                    "charge differs from the answer",
                    plan,
                    attempt,
                    f"no charge of {attempt.cost} credits among {[c['charged'] for c in charges]}",
                )
            unmatched.remove(match[0])
            self._exact(plan, attempt, match[0])
        self._replays(plan, replays, originals[0] if originals else None, charges)
        for attempt in partial:
            match = [
                c for c in unmatched if c["usage"]["output_tokens"] == self.prices.output_tokens(plan, attempt.text)
            ]
            if match:
                unmatched.remove(match[0])
                self._partial(plan, attempt, match[0])
            else:
                self._fail(
                    "cut stream charged for other than what it delivered",
                    plan,
                    attempt,
                    f"no charge for {attempt.text!r} among {[c['usage'] for c in unmatched]}",
                )
        for charge in unmatched:  # what broken attempts may have been charged: bounded
            self.verdict.charges_checked += 1
            if charge["charged"] > self.prices.hold(plan):
                self._fail("charged more than the hold", plan, None, f"charge #{charge.position}")

    # -- charges nobody was told about ---------------------------------------------------------

    def _unmatched(self) -> None:
        by_team: dict[str, list[LedgerEvent]] = defaultdict(list)
        for request_id, events in self.charged.items():
            if request_id not in self.seen:
                by_team[events[0].team].extend(events)
        for team, events in sorted(by_team.items()):
            self.verdict.charges_checked += len(events)
            if len(events) > self.unknown[team]:
                positions = ", ".join(f"#{e.position} {e['request_id']} ({e['charged']})" for e in events[:5])
                self.verdict.fail(
                    "charge nobody was told about",
                    f"team {team}: {len(events)} charge(s) for requests no client knows, but only "
                    f"{self.unknown[team]} request(s) got no answer: {positions}",
                )
