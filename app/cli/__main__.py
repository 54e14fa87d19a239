"""``python -m app.cli``: the ``tollgate`` command, for a checkout without its console script."""

import sys

from app.cli.main import main

sys.exit(main())
