"""``python -m scripts.bench``: see scripts/bench/run.py."""

import sys

from scripts.bench.run import main

if __name__ == "__main__":
    sys.exit(main())
