"""The verdict's shared vocabulary: a violation, the tallies, and the one-line summary.

Every check appends ``Violation``s (with the evidence a reader needs to reproduce it: request ids,
times, events) and the notes that say what was only bounded rather than checked exactly. The run
fails when there is any violation; the summary line is the same every time, for people and CI.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Violation:
    check: str  # which rule: a short name
    detail: str  # what happened, with the evidence


@dataclass
class Verdict:
    violations: list[Violation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: 5xx answers by status, and by documented cause (``503 ledger``, ``502 upstream``, …).
    five_xx: Counter[int] = field(default_factory=Counter)
    causes: Counter[str] = field(default_factory=Counter)
    charges_checked: int = 0
    statuses: Counter[str] = field(default_factory=Counter)

    def fail(self, check: str, detail: str) -> None:
        self.violations.append(Violation(check, detail))

    def note(self, text: str) -> None:
        self.notes.append(text)


def summary_line(requests: int, faults: int, verdict: Verdict) -> str:
    five = ", ".join(f"{status}: {verdict.five_xx.get(status, 0)}" for status in (503, 502, 504))
    other = [s for s in sorted(verdict.five_xx) if s not in (502, 503, 504)]
    five += "".join(f", {status}: {verdict.five_xx[status]}" for status in other)
    return (
        f"chaos: requests={requests} faults={faults} 5xx={{{five}}} charges_checked={verdict.charges_checked} "
        f"violations={len(verdict.violations)}"
    )
