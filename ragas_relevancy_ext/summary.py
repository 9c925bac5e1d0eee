"""The numbers a person looks at first: mean, median, zeros, NaNs and the lowest scores."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

LOWEST = 5


@dataclass(frozen=True)
class Low:
    """One of the lowest-scoring samples."""

    number: int
    score: float
    user_input: str


@dataclass(frozen=True)
class Summary:
    """Summary of one run's scores (NaN scores counted, not averaged)."""

    n: int
    scored: int
    mean: float
    median: float
    zeros: int
    nans: int
    lowest: list[Low] = field(default_factory=list)


def summarise(items: Sequence[tuple[int, float, str]], lowest: int = LOWEST) -> Summary:
    """``items`` are (row number, score, user_input) triples."""
    finite = [(n, s, q) for n, s, q in items if s is not None and math.isfinite(s)]
    scores = [s for _, s, _ in finite]
    ranked = sorted(finite, key=lambda item: (item[1], item[0]))[:lowest]
    return Summary(
        n=len(items),
        scored=len(scores),
        mean=statistics.fmean(scores) if scores else math.nan,
        median=statistics.median(scores) if scores else math.nan,
        zeros=sum(1 for s in scores if s == 0.0),
        nans=len(items) - len(scores),
        lowest=[Low(n, s, q) for n, s, q in ranked],
    )
