"""Where the CPU goes (``--profile DIR``): py-spy samples the floor and Tollgate under the same
closed-loop load, and the frames that take most of it are printed — Tollgate's next to the
floor's, so that what Tollgate adds stands out. py-spy is not a dependency of the project
(``pip install py-spy``); it needs to be allowed to read other processes (ptrace, or root).

Each server's stacks are kept in DIR as py-spy's raw (collapsed) format, one line per distinct
stack with its sample count — what flame graph tools read.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

#: The project's own packages: their functions are listed with everything they call (inclusive).
PROJECT = ("app", "domain", "projections")


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        raise SystemExit("--profile needs py-spy: pip install py-spy")
    return found


def _frame(text: str) -> tuple[str, str]:
    """``Class.func (pkg/mod.py:123)`` → (``Class.func (pkg/mod.py)``, ``pkg``): lines apart, one function."""
    name, _, where = text.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    package = path.split("/", 1)[0].removesuffix(".py")
    return f"{name} ({path})", package


def summarise_stacks(raw: str, top: int = 25) -> dict[str, Any]:
    """Shares of the samples: by package and by function of the frame running (self), and the
    project's own functions with all they call (inclusive)."""
    own: Counter[str] = Counter()
    by_package: Counter[str] = Counter()
    project: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_frame(f) for f in stack.split(";") if not f.startswith("process ")]
        if not frames:
            continue
        total += n
        own[frames[-1][0]] += n
        by_package[frames[-1][1]] += n
        for name in {name for name, package in frames if package in PROJECT}:
            project[name] += n

    def share(counter: Counter[str]) -> list[tuple[str, float]]:
        return [(f, round(100 * n / total, 1)) for f, n in counter.most_common(top)] if total else []

    return {
        "samples": total,
        "self_by_package": share(by_package),
        "self": share(own),
        "project_inclusive": share(project),
    }


def record(pid: int, seconds: float, out: Path, drive: Any) -> dict[str, Any]:
    """Sample ``pid`` (and its worker processes) while ``drive()`` puts it under load."""
    spy = subprocess.Popen(
        [
            py_spy(),
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(int(seconds) + 1),
            "--rate",
            "250",
            "--format",
            "raw",
            "--output",
            str(out),
            "--nonblocking",
            "--subprocesses",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)  # attached
    drive()
    _, err = spy.communicate(timeout=120)
    if spy.returncode != 0 or not out.exists():
        raise RuntimeError(f"py-spy failed ({spy.returncode}): {err.strip()[-1000:]}")
    return summarise_stacks(out.read_text())


def render(case: str, profiles: dict[str, dict[str, Any]], top: int = 12) -> str:
    """Tollgate's shares next to the floor's (py-spy samples at 250 Hz of every thread: a sample is
    4 ms of one thread running)."""
    lines = [f"\nWhere the CPU goes, {case} (py-spy, % of samples):"]
    for title, key in (
        ("self time by package", "self_by_package"),
        ("self time by function", "self"),
        ("project functions, inclusive", "project_inclusive"),
    ):
        for target, prof in profiles.items():
            if prof[key]:
                lines.append(f"  {target}, {title} ({prof['samples']} samples):")
                lines += [f"    {pct:5.1f}%  {frame}" for frame, pct in prof[key][:top]]
    return "\n".join(lines)
