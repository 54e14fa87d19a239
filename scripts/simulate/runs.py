"""Running one simulated world from an empty ledger (copied from a template made once)."""

from __future__ import annotations

import shutil
from pathlib import Path

from scripts.simulate.world import Violation, World


def run_world(seed: int, steps: int, template: Path, workdir: Path) -> tuple[World, Violation | None]:
    """One world of ``seed`` for ``steps`` steps, then traffic stops and it settles."""
    database = workdir / f"ledger-{seed}.sqlite"
    shutil.copy(template, database)
    world = World(seed, database)
    try:
        for _ in range(steps):
            world.step()
        world.settle()
    except Violation as violation:
        return world, violation
    finally:
        world.close()
        for path in workdir.glob(f"ledger-{seed}.sqlite*"):
            path.unlink()
    return world, None


def template_database(workdir: Path) -> Path:
    """An empty ledger, made once (its schema and migrations), copied for every world."""
    from app.store.event_store import open_ledger_store

    path = workdir / "template.sqlite"
    open_ledger_store(f"sqlite:///{path}", workdir, pool_size=1).close()
    return path
