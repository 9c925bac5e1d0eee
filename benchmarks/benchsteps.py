"""Progress for the benchmark scripts: an estimate up front, then one line per step on stderr.

The tables go to stdout; these lines go to stderr, so ``python benchmarks/x.py > table.txt``
still shows where a long run is. Estimates come from each script's own model of its steps
(calls times latency, samples times a per-sample cost) and are rough by design.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

__all__ = ["Steps"]


class Steps:
    """Numbered steps with their estimated seconds; :meth:`start` prints one line per step."""

    def __init__(self, title: str, estimates: Sequence[tuple[str, float]]):
        self.title = title
        self.estimates = list(estimates)
        self.done = 0
        self.started = time.perf_counter()
        total = sum(seconds for _, seconds in self.estimates)
        self._say(f"{title}: {len(self.estimates)} steps, about {_duration(total)} (estimate)")

    def start(self, what: str | None = None) -> None:
        """Announce the next step, with time so far and the estimate of what is left."""
        label, _ = self.estimates[self.done]
        self.done += 1
        left = sum(seconds for _, seconds in self.estimates[self.done - 1 :])
        elapsed = time.perf_counter() - self.started
        self._say(
            f"[{self.done}/{len(self.estimates)}] {what or label} "
            f"({_duration(elapsed)} so far, about {_duration(left)} left)"
        )

    def finish(self) -> None:
        """The closing line: how long the whole run took against its estimate."""
        total = sum(seconds for _, seconds in self.estimates)
        elapsed = time.perf_counter() - self.started
        self._say(f"{self.title}: done in {_duration(elapsed)} (estimated {_duration(total)})")

    @staticmethod
    def _say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds // 60:.0f} min {seconds % 60:02.0f} s"
