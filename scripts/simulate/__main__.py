"""``python -m scripts.simulate [--seed S] [--steps N] [--seconds T]``: run simulated worlds and check
the ledger's invariants after every step.

With ``--seed`` one world runs, exactly as that seed says, and a violation prints its trace (every
step up to the first that broke an invariant: the shortest run of that seed that reproduces it).
Without, fresh seeds run one after another for ``--seconds`` (CI: about a minute); the summary line
gives the seeds run, the steps, steps per second and the faults injected by kind. Exit 1 on a
violation, with the seed to replay it.
"""

from __future__ import annotations

import argparse
import logging
import secrets
import sys
import tempfile
import time
from pathlib import Path

from scripts.simulate.faulty_store import FaultCounts
from scripts.simulate.mutations import MUTATIONS, mutated
from scripts.simulate.runs import run_world, template_database


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, help="run this one seed (replays it exactly)")
    parser.add_argument("--steps", type=int, default=400, help="steps per world (default 400)")
    parser.add_argument("--seconds", type=float, default=60.0, help="without --seed: run fresh seeds this long")
    parser.add_argument(
        "--mutation", choices=sorted(MUTATIONS), help="plant this bug in the production code and look for it"
    )
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)  # the writer logs every injected fault; the trace says them
    if args.mutation:
        with mutated(args.mutation) as mutation:
            print(f"planted: {mutation.what} ({mutation.module}.{mutation.owner}.{mutation.attribute})")
            found = explore(args)
        print("found" if found else f"NOT FOUND within {args.seconds:.0f} s")
        return 0 if found else 1
    return 1 if explore(args) else 0


def explore(args: argparse.Namespace) -> bool:
    """Run the seed, or fresh seeds for the time budget; whether an invariant broke (its trace printed)."""
    with tempfile.TemporaryDirectory(prefix="tollgate-sim-") as tmp:
        workdir = Path(tmp)
        template = template_database(workdir)
        seeds = [args.seed] if args.seed is not None else None
        started, steps, worlds = time.monotonic(), 0, 0
        faults = FaultCounts()
        while True:
            seed = seeds.pop() if seeds is not None and seeds else secrets.randbits(48)
            world, violation = run_world(seed, args.steps, template, workdir)
            worlds, steps = worlds + 1, steps + world.steps
            for kind, count in world.faults.by_kind.items():
                faults.by_kind[kind] = faults.by_kind.get(kind, 0) + count
            if violation is not None:
                print("\n".join(world.trace))
                print(f"VIOLATION at step {world.steps} of seed {seed}: {violation}")
                print(f"replay: python -m scripts.simulate --seed {seed} --steps {world.steps}")
                return True
            if seeds is not None or time.monotonic() - started >= args.seconds:
                break
        elapsed = time.monotonic() - started
        injected = ", ".join(f"{kind} {count}" for kind, count in sorted(faults.by_kind.items())) or "none"
        print(
            f"simulate: {worlds} seed(s), {steps} steps in {elapsed:.1f} s ({steps / elapsed:.0f} steps/s); "
            f"faults injected: {injected}; 0 violations"
        )
    return False


if __name__ == "__main__":
    sys.exit(main())
