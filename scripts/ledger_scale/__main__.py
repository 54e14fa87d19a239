"""``python -m scripts.ledger_scale``: see scripts/ledger_scale/run.py."""

import sys

from scripts.ledger_scale.run import main

if __name__ == "__main__":
    sys.exit(main())
