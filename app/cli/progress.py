"""Progress on long operator runs: a bar on a terminal, a line every tenth otherwise."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


def progress_bar(label: str, total: int | None) -> Callable[[int], None]:
    started = time.monotonic()
    shown = {"tenth": -1}
    tty = sys.stderr.isatty()

    def report(done: int) -> None:
        rate = done / max(time.monotonic() - started, 1e-6)
        if total:
            fraction = min(done / total, 1.0)
            if tty:
                bar = "#" * int(fraction * 30)
                sys.stderr.write(f"\r{label} [{bar:<30}] {done}/{total} events ({rate:,.0f}/s)")
                if done >= total:
                    sys.stderr.write("\n")
            elif int(fraction * 10) > shown["tenth"]:
                shown["tenth"] = int(fraction * 10)
                sys.stderr.write(f"{label}: {done}/{total} events ({rate:,.0f}/s)\n")
        elif tty:
            sys.stderr.write(f"\r{label}: {done} events ({rate:,.0f}/s)")
        sys.stderr.flush()

    return report
