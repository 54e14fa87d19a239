"""Bugs put back into the production code on purpose, to show the simulator finds them.

Each mutation replaces one line of a production module's source, compiles that copy of the module,
and puts the mutated function in place of the real one (on its class) for the length of a run; the
files on disk are never touched. ``python -m scripts.simulate --mutation NAME`` runs fresh seeds
until it finds the bug, and prints the seed that shows it.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Mutation:
    """Replace ``old`` by ``new`` in ``module``'s source; the function ``owner.attribute`` is swapped."""

    module: str
    owner: str
    attribute: str
    old: str
    new: str
    what: str


MUTATIONS = {
    "charge-past-balance": Mutation(
        "domain.ledger_holds",
        "TeamHolds",
        "charge_priced",
        "charged = min(cost, hold + room)",
        "charged = cost",
        "a charge takes its whole cost, even beyond its hold and the available balance",
    ),
    "closed-hold-kept": Mutation(
        "domain.ledger_state",
        "LedgerState",
        "close_hold",
        "hold = self.holds.pop(request_id)",
        "hold = self.holds[request_id]",
        "a charged or released hold is never forgotten (its credit stays held)",
    ),
    "dead-stream-charged-again": Mutation(
        "domain.ledger_holds",
        "TeamHolds",
        "release_abandoned",
        "or d.request_id in self.lease_charges",
        "or False",
        "a process taken for dead has its leased stream charged again by the others, though its own charge was made",
    ),
    "budget-overspent": Mutation(
        "domain.ledger_holds",
        "TeamHolds",
        "charge_priced",
        "room = self.available if tightest is None else min(self.available, max(0, tightest[0]))",
        "room = self.available",
        "a charge beyond its hold takes what the balance has, whatever its budget has left",
    ),
    "answered-before-durable": Mutation(
        "app.ledger.writer",
        "LedgerWriter",
        "_commit",
        '                self._fail(batch, LedgerUnavailable(f"the ledger could not be written: {exc}"))',
        "                self._committed(written, outcomes)",
        "a batch the database did not take is answered as if it had been written",
    ),
}


@contextmanager
def mutated(name: str) -> Iterator[Mutation]:
    """The production code with the mutation ``name`` in place, until the block ends."""
    mutation = MUTATIONS[name]
    module = importlib.import_module(mutation.module)
    source = inspect.getsource(module)
    if source.count(mutation.old) != 1:
        raise ValueError(f"mutation {name}: the line to replace is not in {mutation.module} exactly once")
    mutant = types.ModuleType(f"{mutation.module}__mutant")
    mutant.__file__ = module.__file__
    sys.modules[mutant.__name__] = mutant  # dataclasses look their module up while the copy is made
    try:
        exec(compile(source.replace(mutation.old, mutation.new), str(module.__file__), "exec"), vars(mutant))
        owner = getattr(module, mutation.owner)
        original = owner.__dict__[mutation.attribute]
        setattr(owner, mutation.attribute, vars(getattr(mutant, mutation.owner))[mutation.attribute])
        try:
            yield mutation
        finally:
            setattr(owner, mutation.attribute, original)
    finally:
        del sys.modules[mutant.__name__]
