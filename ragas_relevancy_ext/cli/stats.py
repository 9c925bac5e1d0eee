"""The numbers of a run, pure functions without RAGAS or I/O: its summary and cost, agreement
with human ratings (Pearson and Spearman with seeded bootstrap intervals), the spread of repeats.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from ..error_bars import RESAMPLES, SEED, bootstrap_interval
from ..scoring.usage import NOT_REPORTED, Prices, Usage, format_usage

if TYPE_CHECKING:
    from ..error_bars import ErrorBars


def pearson(x: ArrayLike, y: ArrayLike) -> float:
    """Pearson's r; NaN when either side is constant or there are fewer than two pairs."""
    a, b = _pairs(x, y)
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    return float(np.clip(np.corrcoef(a, b)[0, 1], -1.0, 1.0))


def spearman(x: ArrayLike, y: ArrayLike) -> float:
    """Spearman's rho: Pearson's r of the ranks (ties share their average rank)."""
    from scipy.stats import rankdata  # type: ignore[import-untyped]

    a, b = _pairs(x, y)
    return pearson(rankdata(a), rankdata(b)) if len(a) else math.nan


@dataclass(frozen=True)
class Agreement:
    """Correlation of scores with ratings, with bootstrap intervals, on ``n`` pairs."""

    n: int
    dropped: int
    pearson: float
    pearson_interval: tuple[float, float]
    spearman: float
    spearman_interval: tuple[float, float]
    resamples: int
    seed: int


def agreement(
    scores: Sequence[float],
    ratings: Sequence[float],
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Agreement:
    """Pearson and Spearman with 95% intervals; pairs with a NaN score are dropped and counted."""
    if len(scores) != len(ratings):
        raise ValueError(f"{len(scores)} scores but {len(ratings)} ratings")
    a, b = _pairs(scores, ratings)
    return Agreement(
        n=len(a),
        dropped=len(scores) - len(a),
        pearson=pearson(a, b),
        pearson_interval=bootstrap_interval(a, b, pearson, resamples, seed=seed),
        spearman=spearman(a, b),
        spearman_interval=bootstrap_interval(a, b, spearman, resamples, seed=seed),
        resamples=resamples,
        seed=seed,
    )


@dataclass(frozen=True)
class Spread:
    """Per-sample mean and standard deviation over repeated scores, and the mean deviation."""

    means: list[float]
    deviations: list[float]
    mean_deviation: float
    repeats: int


def repeat_spread(runs: Sequence[Sequence[float]]) -> Spread:
    """``runs[i]`` holds sample i's K scores: mean and sample standard deviation (ddof=1) of
    its finite ones (NaN with fewer than two)."""
    means: list[float] = []
    deviations: list[float] = []
    repeats = max((len(r) for r in runs), default=0)
    for scores in runs:
        values = np.asarray(scores, dtype=float)
        values = values[np.isfinite(values)]
        means.append(float(values.mean()) if values.size else math.nan)
        deviations.append(float(values.std(ddof=1)) if values.size >= 2 else math.nan)
    finite = [d for d in deviations if math.isfinite(d)]
    mean_deviation = float(np.mean(finite)) if finite else math.nan
    return Spread(means, deviations, mean_deviation, repeats)


def _pairs(x: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"need two equal-length lists, got shapes {a.shape} and {b.shape}")
    keep = np.isfinite(a) & np.isfinite(b)
    return a[keep], b[keep]


# -- the summary of a run ----------------------------------------------------------------

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
    nan_causes: dict[str, int] = field(default_factory=dict)
    tied: int = 0  # rows not listed in ``lowest`` whose score equals its last one
    cost: CostSummary | None = None  # what the run cost, when known
    error_bars: ErrorBars | None = None  # the mean's interval and variance parts, when asked

    def causes_text(self) -> str:
        """Why rows are NaN, e.g. ``no usable probe 1, TimeoutError 1`` ("" when none is)."""
        return ", ".join(f"{cause} {count}" for cause, count in self.nan_causes.items())

    def nans_text(self) -> str:
        """The NaN count with its causes, e.g. ``2 (no usable probe 1, TimeoutError 1)``."""
        causes = self.causes_text()
        return f"{self.nans} ({causes})" if causes else str(self.nans)

    def lowest_title(self) -> str:
        """``"lowest 5"``, or ``"lowest 5 (2 more tied at 0.0000 not shown)"``."""
        title = f"lowest {len(self.lowest)}"
        if self.tied:
            title += f" ({self.tied} more tied at {self.lowest[-1].score:.4f} not shown)"
        return title


def summarise(
    items: Sequence[tuple[int, float, str]],
    lowest: int = LOWEST,
    causes: Mapping[int, str] | None = None,
) -> Summary:
    """Summary of (row number, score, user_input) triples; ``causes`` says, by row number,
    why a row is NaN (counted per cause, most frequent first)."""
    finite = [(n, s, q) for n, s, q in items if s is not None and math.isfinite(s)]
    not_scored = [n for n, s, _ in items if s is None or not math.isfinite(s)]
    scores = [s for _, s, _ in finite]
    ranked = sorted(finite, key=lambda item: (item[1], item[0]))
    cut = ranked[lowest - 1][1] if 0 < lowest <= len(ranked) else None
    tied = sum(1 for _, s, _ in ranked[lowest:] if s == cut)
    ranked = ranked[:lowest]
    return Summary(
        n=len(items),
        scored=len(scores),
        mean=statistics.fmean(scores) if scores else math.nan,
        median=statistics.median(scores) if scores else math.nan,
        zeros=sum(1 for s in scores if s == 0.0),
        nans=len(items) - len(scores),
        lowest=[Low(n, s, q) for n, s, q in ranked],
        nan_causes=dict(
            Counter((causes or {}).get(n, "unknown") for n in not_scored).most_common()
        ),
        tied=tied,
    )


# -- what a run cost -------------------------------------------------------------------------


@dataclass(frozen=True)
class CostSummary:
    """The usage of the ``rows`` that carry one, summed; ``missing`` rows (saved before usage
    was kept) carry none."""

    total: Usage
    rows: int
    missing: int = 0
    prices: Prices = field(default_factory=Prices)

    def judge_usd(self) -> float | None:
        """USD for the judge, or None (a price not given, tokens not reported)."""
        judge = replace(self.total, embedding_requests=0)
        return judge.cost(self.prices.judge_in, self.prices.judge_out)

    def embeddings_usd(self) -> float | None:
        """USD for the embeddings (0 without requests), or None."""
        embeddings = replace(self.total, judge_prompt_tokens=0, judge_completion_tokens=0)
        return embeddings.cost(0.0, 0.0, self.prices.embeddings)

    def lines(self, flags: bool = True) -> list[str]:
        """Totals, per-row means and the cost, "not reported" where the provider said nothing;
        a price not given is named by its option (``flags``) or, for a page, in words."""
        total, n = self.total, self.rows
        if not n:
            saved = f"usage {NOT_REPORTED}: {self.missing} row(s) saved without usage"
            return [saved] if self.missing else []
        covered = f"{n} row(s)" + (
            f"; {self.missing} more saved without usage" if self.missing else ""
        )
        return [
            f"usage ({covered}): {format_usage(total)}",
            f"per row: {format_usage(total, n)}",
            f"cost: {self._cost_text(flags)}",
        ]

    def _cost_text(self, flags: bool) -> str:
        judge, embeddings = self.judge_usd(), self.embeddings_usd()
        named = ("--price-in and --price-out", "--price-embeddings") if flags else (None, None)
        parts = [
            f"judge {_usd(judge, self.total.judge_tokens, named[0])}",
            f"embeddings {_usd(embeddings, self.total.embedding_tokens, named[1])}",
        ]
        if judge is not None and embeddings is not None:
            per_row = (judge + embeddings) / self.rows if self.rows else math.nan
            total = _dollars(judge + embeddings)
            return f"{total} ({_dollars(per_row)} per row; " + "; ".join(parts) + ")"
        return "; ".join(parts)


def _dollars(value: float) -> str:
    """USD with 4 decimals, or 4 significant digits below a cent."""
    return f"${value:.4f}" if value >= 0.01 or value == 0 else f"${value:.4g}"


def _usd(value: float | None, tokens: int | None, flags: str | None) -> str:
    if value is not None:
        return _dollars(value)
    if tokens is None:
        return f"not known: tokens {NOT_REPORTED}"
    if flags is None:
        return "not known: no price per million tokens was given for this run"
    return f"not known: give {flags} (USD per million tokens)"


def summarise_cost(usages: Iterable[Usage | None], prices: Prices | None = None) -> CostSummary:
    """Sum the rows' usages in one pass; rows without one count as ``missing``, not as 0."""
    total, known, missing = Usage(), 0, 0
    for usage in usages:
        if usage is None:
            missing += 1
        else:
            total, known = total.add(usage), known + 1
    return CostSummary(total, known, missing, prices or Prices())
