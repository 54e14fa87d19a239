"""The long fuzzing run, for people: the fuzzers of ``make test`` (tests/e2e/fuzz) with many more examples.

``make test`` runs them bounded (12 examples each, the same every run). This runs them with
``--examples`` each (default 500) from a random seed (printed, so a run can be repeated with
``--seed``), against a real gateway and the fake upstream, and prints one line::

    fuzz: 30412 cases (9210 served), 0 gateway 5xx, 0 tracebacks, 0 balance violations, 0 distinct failures,
    projections current

(on one line) then every distinct failure with the smallest input that showed it. It ends with
whether the audit history projection had caught up with every event the run wrote (``projections
current``, or ``projections N events behind``, when it had not within a few seconds: a request
stopped it). It exits 0 only when there was no failure and the projections were current. Run it from
the repository root (it needs the test suite, and PostgreSQL with ``TOLLGATE_TEST_BACKEND=postgresql``)::

    python -m scripts.fuzz                      # every fuzzer
    python -m scripts.fuzz --examples 2000 -k bodies
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=500, help="examples per fuzzer (default 500)")
    parser.add_argument("--seed", type=int, default=None, help="the random seed (default: a new one, printed)")
    parser.add_argument("-k", dest="select", default=None, help="only the fuzzers whose names match (pytest's -k)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"fuzzing with {args.examples} examples per fuzzer, seed {seed}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tollgate-fuzz-") as work:
        summary = Path(work) / "summary.json"
        env = {
            **os.environ,
            "TOLLGATE_FUZZ_EXAMPLES": str(args.examples),
            "TOLLGATE_FUZZ_SEED": str(seed),
            "TOLLGATE_FUZZ_SUMMARY": str(summary),
        }
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=no", "tests/e2e/fuzz"]
        if args.select:
            command += ["-k", args.select]
        finished = subprocess.run(command, env=env, stdout=subprocess.DEVNULL)
        if not summary.exists():
            print(f"the fuzzers did not run to the end (pytest exited {finished.returncode})", file=sys.stderr)
            return 2
        tally = json.loads(summary.read_text())
    print(tally["summary"])
    for failure in tally["failures"]:
        print(
            f"[{failure['kind']}] {failure['route']} -> {failure['status']} (x{failure['count']}): {failure['detail']}"
        )
        if failure["example"]:
            print(f"    input: {failure['example'][:500]}")
    return 1 if tally["failures"] or tally.get("behind") != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
