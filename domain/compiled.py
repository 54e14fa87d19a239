"""Which modules the build compiles to C (mypyc), and the switch back to their Python source.

A request passes through a few dozen small typed modules; mypyc compiles them ahead of time into C
extensions that sit beside their ``.py`` files (``setup.py``; ``make install`` builds them in place,
``pip install .`` into the wheel). Python imports an extension before a source of the same name, so
a compiled build runs them without anything else to switch on.

Their source is imported instead when

- ``TOLLGATE_PURE=1`` is set (a profile by function, a debugger, a test that patches a module), or
- in a checkout, an extension is older than its source: a module edited since the last build runs
  as edited, never as it was compiled (``make install`` compiles it again).

Not compiled, and why: the ledger's aggregate and its events (the event-sourcing library makes their
classes, which a compiled class cannot be); the request path's coroutines (billing, leases, the
billed call, authentication, rate limits, the upstream call: compiled, a refusal raised below them
reached the client as a 500 where the source answers 402 — in the unit tests; a small reproduction
compiled alone behaved, and the cause was not found — and async generators and ``except*`` are not
compiled at all); the route handlers (the web framework reads their signatures);
``domain.usage`` (compiled, a float count is a ``TypeError`` at the call instead of its own
``ValueError``); a msgspec ``Struct`` (compiled, its fields' annotations all read ``type`` and its
decoder refuses every value: a compiled module's Struct lives in a module of its own, as
``app.translate.chat.chunk_shape`` and ``domain.credit_lot``; a unit test keeps it so). The ledger
writer is compiled: its thread's work is synchronous, its one coroutine a hand-off. Compiled, an
argument is converted to its annotated type at the call (a ``bool`` given as an ``int`` is an
``int``): the unit tests run the source (``TOLLGATE_PURE=1``); the end-to-end halves, the simulator
and the chaos suite the compiled build.

Only the standard library is imported here: ``setup.py`` reads :data:`COMPILED` before anything the
project depends on is installed.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

#: The modules compiled: what the ledger writer's thread runs for every charge (its decisions, the
#: log's leaf encoding and hashing, budgets, credit lots, pricing and money, the receipt and its
#: signature) and the request path's synchronous parts (the answer's head, the prompt's count, the
#: wire's translation, the access record). By the measure of ``python -m scripts.relay_cost`` under
#: ``valgrind --tool=callgrind`` (docs/performance.md).
COMPILED: tuple[str, ...] = (
    "app.http.answer_head",
    "app.http.attribution",
    "app.http.routes.request_counts",
    "app.ledger.prices",
    "app.ledger.receipts",
    "app.ledger.team_cache",
    "app.ledger.writer",
    "app.observability.record",
    "app.store.log_append",
    "app.tokens.prompt",
    "app.translate.answers",
    "app.translate.chat.passthrough",
    "app.translate.chat.upstream",
    "app.translate.exchange",
    "domain.budgets",
    "domain.credit_lots",
    "domain.money",
    "domain.pricing",
    "domain.rate_limits",
    "domain.transparency.appender",
    "domain.transparency.event_leaf",
    "domain.transparency.hashing",
    "domain.transparency.keys",
    "domain.transparency.receipt",
)

#: Set to ``1``: every compiled module is imported from its source.
PURE_ENV = "TOLLGATE_PURE"
_ROOT = Path(__file__).resolve().parent.parent


def source_path(module: str) -> Path:
    """The ``.py`` file of a module of :data:`COMPILED` (a package's is its ``__init__.py``)."""
    path = _ROOT.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _extension(source: Path) -> Path | None:
    """The compiled extension beside ``source`` (``memory.py`` → ``memory.cpython-311-….so``), if any."""
    stem = source.with_suffix("")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        found = stem.with_name(stem.name + suffix)
        if found.exists():
            return found
    return None


def source_instead(source: Path, extension: Path | None, pure: bool, checkout: bool) -> bool:
    """Whether to import ``source`` rather than its compiled ``extension``: asked to (``pure``), or,
    in a checkout, the extension was built before the source last changed. (Installed from a wheel,
    the two files' dates say only the order pip wrote them in.)"""
    if extension is None or not source.exists():
        return False
    return pure or (checkout and extension.stat().st_mtime < source.stat().st_mtime)


class _SourceFirst(importlib.abc.MetaPathFinder):
    """Finds a compiled module's source instead of its extension, when it must (see the module's
    docstring); every other import goes on to the usual finders."""

    def __init__(self, pure: bool) -> None:
        self._pure = pure
        self._checkout = (_ROOT / ".git").exists()  # built in place (make install), not installed from a wheel
        self._compiled = frozenset(COMPILED)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in self._compiled:
            return None
        source = source_path(fullname)
        if not source_instead(source, _extension(source), self._pure, self._checkout):
            return None  # the usual finders find what there is: the extension, or (a pure install) the source
        is_package = source.name == "__init__.py"
        return importlib.util.spec_from_file_location(
            fullname, source, submodule_search_locations=[str(source.parent)] if is_package else None
        )


def use_sources_where_needed() -> None:
    """Put the source-first finder in front of the import system, once (both top-level packages'
    ``__init__`` call it, so it is in place before any compiled module is imported)."""
    if not any(isinstance(finder, _SourceFirst) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SourceFirst(os.environ.get(PURE_ENV) == "1"))


def compiled_modules() -> list[str]:
    """The modules of :data:`COMPILED` this process runs compiled (imports them all)."""
    found = []
    for name in COMPILED:
        module = importlib.import_module(name)
        if module.__file__ is not None and not module.__file__.endswith(".py"):
            found.append(name)
    return found
