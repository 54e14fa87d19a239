"""Re-rating's money rules: what a re-rated charge is owed back, and when a re-rate may be applied.

``tollgate ledger rerate --apply`` moves money, so it is idempotent by content, not by spelling:

- **What a charge is owed back.** A charge collected ``charged`` (its cost less what was left
  ``uncollected`` because its hold, budget or balance ran out). Re-rated, it would have collected its
  new cost — but a charge that was cut short had met its cap, which the new price does not lift: it
  would have collected no more than it did. So a re-rated charge is refunded what it collected beyond
  its new cost, never more than it collected, and one that was cut short is never debited.
- **Which re-rate it is.** A re-rate is named by its content: its period with both ends in UTC, and
  the canonical form of the prices it applied — numbers normalised (``2.50`` is ``2.5``), tables in
  one order, an unset 1-hour cache rate as the 5-minute one it falls back to — so the same day written
  with a ``+01:00`` offset, or the same prices file with a comment added, is the same re-rate.
- **Once only.** A team's charges of a model are re-rated at most once over any instant: a re-rate
  whose period overlaps an applied one's (``[from, to)`` intervals sharing an instant) for any model
  both re-rated is refused, naming the earlier one. The models a re-rate covers are those it priced
  charges of. And only a period that has ended is applied: charges still to come in it would not be
  re-rated, and a later re-rate of them would overlap this one.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from domain.ledger_errors import LedgerError
from domain.pricing import Price

#: How an applied re-rate's reference starts; its adjustments' references add ``:MODEL:KEY``.
PREFIX = "rerate:"


class RerateRefused(LedgerError):
    """A re-rate that may not be applied (it overlaps an applied one, or its period has not ended)."""


class RerateRaced(LedgerError):
    """The team's ledger moved while the re-rate was computed: compute it again."""


def rerated_collection(charged: int, uncollected: int, rerated_cost: int) -> int:
    """What a charge that collected ``charged`` (leaving ``uncollected``) would have collected at a
    cost of ``rerated_cost``: all of it, unless the charge was cut short — then no more than it did."""
    return min(rerated_cost, charged) if uncollected else rerated_cost


@dataclass(frozen=True, slots=True)
class RerateScope:
    """One re-rate: the period ``[start, end)`` in UTC, the models it re-rated, and the digest of the
    canonical prices it applied to them. ``reference`` names it, whatever the spelling of its input."""

    start: datetime
    end: datetime
    models: tuple[str, ...]
    prices: str  # sha256 of the canonical price list of ``models``

    @property
    def reference(self) -> str:
        content = json.dumps(
            {"from": self.start.isoformat(), "to": self.end.isoformat(), "prices": self.prices},
            separators=(",", ":"),
            sort_keys=True,
        )
        return PREFIX + hashlib.sha256(content.encode()).hexdigest()[:16]

    def as_record(self) -> dict[str, Any]:
        return {"from": self.start.isoformat(), "to": self.end.isoformat(), "models": list(self.models)}


def scope_of(start: datetime, end: datetime, prices: Mapping[str, Price], models: Iterable[str]) -> RerateScope:
    """The re-rate of ``models`` over ``[start, end)`` at ``prices`` (both ends taken to UTC)."""
    chosen = tuple(sorted(set(models)))
    listed = {model: canonical_price(prices[model]) for model in chosen}
    digest = hashlib.sha256(json.dumps(listed, separators=(",", ":"), sort_keys=True).encode()).hexdigest()
    return RerateScope(start.astimezone(UTC), end.astimezone(UTC), chosen, digest)


def _number(value: Decimal) -> str:
    return f"{value.normalize():f}"


def canonical_price(price: Price) -> dict[str, Any]:
    """A price as what it bills, not as it was written: every rate a normalised number, the 1-hour
    cache rate always said (unset, it is the 5-minute one), tiers and fees in name order, free tools left out."""
    record: dict[str, Any] = {
        "input": _number(price.input),
        "output": _number(price.output),
        "cache_create": _number(price.cache_create),
        "cache_hit": _number(price.cache_hit),
        "cache_write_1h": _number(price.write_1h),
    }
    if price.long_context is not None:
        record["long_context"] = {
            "threshold": price.long_context.threshold,
            **canonical_price(price.long_context.price),
        }
    if price.service_tiers:
        record["service_tiers"] = {name: canonical_price(t) for name, t in sorted(price.service_tiers.items())}
    fees = {name: _number(fee) for name, fee in sorted(price.tool_fees.items()) if fee}
    if fees:
        record["tool_fees"] = fees
    for kind in ("image_input", "image_output"):
        rate = getattr(price, kind)
        if rate is not None:
            record[kind] = _number(rate)
    if price.images:
        record["images"] = {name: _number(each) for name, each in sorted(price.images.items())}
    for media in ("audio_second", "input_characters", "audio_input"):
        rate = getattr(price, media)
        if rate is not None:
            record[media] = _number(rate)
    return record


def overlapping(applied: Mapping[str, Mapping[str, Any]], scope: RerateScope) -> tuple[str, Mapping[str, Any]] | None:
    """The first applied re-rate (reference → its record) whose period shares an instant with
    ``scope``'s for a model both re-rated, if any."""
    for reference, record in applied.items():
        start, end = datetime.fromisoformat(record["from"]), datetime.fromisoformat(record["to"])
        if start < scope.end and scope.start < end and set(record["models"]) & set(scope.models):
            return reference, record
    return None


def refusal(applied: Mapping[str, Mapping[str, Any]], scope: RerateScope, team: str, now: datetime) -> str | None:
    """Why ``scope`` may not be applied to ``team`` at ``now`` (None: it may)."""
    earlier = overlapping(applied, scope)
    if earlier is None:
        if scope.end > now:
            return (
                f"the period runs to {scope.end.isoformat()}, which has not come (it is {now.isoformat()}): "
                "only a period that has ended is re-rated, or charges still to come in it would never be"
            )
        return None
    reference, record = earlier
    shared = ", ".join(sorted(set(record["models"]) & set(scope.models)))
    by = f" by {record['actor']}" if record.get("actor") else ""
    when = f" at {record['at']}" if record.get("at") else ""
    return (
        f"team {team!r} already had {shared} re-rated from {record['from']} to {record['to']} ({reference}, "
        f"applied{by}{when}); a re-rate may not overlap an earlier one of the same model: re-rate only what "
        "no earlier re-rate covered"
    )


_ISO = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:[+-]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?)?"
#: The references of re-rates applied before they were named by content:
#: ``rerate:DIGEST12:FROM:TO:MODEL:KEY`` (the file's bytes' digest and the ends as typed).
_LEGACY = re.compile(rf"rerate:(?P<digest>[0-9a-f]{{12}}):(?P<start>{_ISO}):(?P<end>{_ISO}):(?P<model>.+):[^:]+")


def legacy_rerate(reference: str) -> tuple[str, dict[str, Any]] | None:
    """An adjustment reference of a re-rate applied before re-rates were events of their own: the
    re-rate it belonged to (its reference without the model and key) and what it covered."""
    found = _LEGACY.fullmatch(reference)
    if found is None:
        return None
    start, end = datetime.fromisoformat(found["start"]), datetime.fromisoformat(found["end"])
    return (
        f"rerate:{found['digest']}:{found['start']}:{found['end']}",
        {"from": start.astimezone(UTC).isoformat(), "to": end.astimezone(UTC).isoformat(), "models": [found["model"]]},
    )


def with_legacy(applied: dict[str, dict[str, Any]], reference: str) -> None:
    """Count an adjustment made under a pre-event re-rate ``reference`` as that re-rate's (in place)."""
    legacy = legacy_rerate(reference)
    if legacy is None:
        return
    name, record = legacy
    known = applied.get(name)
    if known is None:
        applied[name] = record
    elif record["models"][0] not in known["models"]:
        applied[name] = {**known, "models": [*known["models"], *record["models"]]}
