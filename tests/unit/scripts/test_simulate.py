"""The deterministic simulator of the ledger core: worlds keep every invariant under injected faults,
a seed replays exactly, and bugs put back into the production code are found."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.simulate.mutations import MUTATIONS, mutated
from scripts.simulate.runs import run_world, template_database


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    logging.disable(logging.CRITICAL)  # every injected fault is logged by the writer
    yield template_database(tmp_path_factory.mktemp("simulate"))
    logging.disable(logging.NOTSET)


def test_worlds_with_faults_keep_every_invariant(template: Path):
    faults: dict[str, int] = {}
    for seed in (11, 12, 13):
        world, violation = run_world(seed, 300, template, template.parent)
        assert violation is None, "\n".join([*world.trace[-20:], str(violation)])
        for kind, count in world.faults.by_kind.items():
            faults[kind] = faults.get(kind, 0) + count
    assert faults.get("commit failed", 0) > 0
    assert faults.get("acknowledgement lost", 0) > 0


def test_a_seed_replays_exactly(template: Path):
    first, _ = run_world(7, 200, template, template.parent)
    again, _ = run_world(7, 200, template, template.parent)
    assert first.trace == again.trace
    assert first.faults.by_kind == again.faults.by_kind
    other, _ = run_world(8, 200, template, template.parent)
    assert other.trace != first.trace


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_bug_planted_in_the_production_code_is_found(template: Path, name: str):
    with mutated(name):
        found = next((seed for seed in range(1, 31) if run_world(seed, 300, template, template.parent)[1]), None)
    assert found is not None, f"{name}: not found in 30 seeds of 300 steps"
    world, _ = run_world(1, 300, template, template.parent)  # and the code is whole again after
    assert world.steps == 300
