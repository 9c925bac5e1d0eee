"""How sure a score is: error bars on a sample, on a run, and on the change between two runs.

After Miller, "Adding Error Bars to Evals" (2024, arXiv 2411.00640); normal quantiles, not t.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict, deque
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from itertools import compress
from statistics import NormalDist
from typing import Any

import numpy as np

from .scoring.report import clean_text, fmt

__all__ = [
    "METHODS",
    "ErrorBars",
    "Pairing",
    "PairedDifference",
    "Threshold",
    "best_threshold",
    "detectable_drop",
    "run_error_bars",
    "mean_interval",
    "pair_by_question",
    "paired_difference",
    "question_key",
    "rows_needed",
]

METHODS = ("clt", "clustered", "bootstrap")
LEVEL = 0.95
FEW_CLUSTERS = 10  # under this many clusters a clustered standard error is itself unsteady
POWER = 0.8
RESAMPLES = 2000
SEED = 20240611


def _percentiles(values: np.ndarray, level: float) -> tuple[float, float]:
    """The central ``level`` interval of ``values`` (percentile bootstrap)."""
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class ErrorBars:
    """A run's mean score, its standard error and interval (``n`` scored rows, ``nans`` left
    out), and the scores' variance split into between-question and within (probe noise) parts."""

    mean: float
    stderr: float
    ci_low: float
    ci_high: float
    n: int
    method: str
    between_variance: float
    within_variance: float
    nans: int = 0
    clusters: int | None = None
    level: float = LEVEL

    def interval_text(self) -> str:
        """``0.7812 ± 0.0231 (95% CI 0.7359-0.8265, clt, n=200)``."""
        if not math.isfinite(self.mean):
            return "NaN"
        how = self.method + (f" over {self.clusters} clusters" if self.clusters else "")
        if self.clusters and self.clusters < FEW_CLUSTERS:
            how += f", under {FEW_CLUSTERS} clusters: a rough interval"
        return (
            f"{self.mean:.4f} ± {fmt(self.stderr)} ({self.level:.0%} CI {fmt(self.ci_low)}-"
            f"{fmt(self.ci_high)}, {how}, n={self.n})"
        )

    def variance_text(self) -> str:
        """``variance: between questions 0.0123, within (probes) 0.0012 (9% of the total)``."""
        share = ""
        total = self.between_variance + self.within_variance
        if math.isfinite(total) and total > 0:
            share = f" ({self.within_variance / total:.0%} of the total)"
        return (
            f"variance: between questions {fmt(self.between_variance, 5)}, "
            f"within (probes) {fmt(self.within_variance, 5)}{share}"
        )


def run_error_bars(
    reports: Any,
    *,
    clusters: Sequence[Hashable] | None = None,
    method: str | None = None,
    level: float = LEVEL,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> ErrorBars:
    """Error bars of a run from its reports (None for a row that left none) or from the
    ``EvaluationResult`` of ``ragas.evaluate``; ``clusters`` gives each report's group."""
    if hasattr(reports, "traces"):
        from .results import reports_for

        reports = reports_for(reports)
    reports = list(reports)
    scores = [r.score if r is not None else math.nan for r in reports]
    stderrs = [r.score_stderr if r is not None else math.nan for r in reports]
    return mean_interval(
        scores,
        stderrs=stderrs,
        clusters=clusters,
        method=method,
        level=level,
        resamples=resamples,
        seed=seed,
    )


def mean_interval(
    scores: Sequence[float],
    *,
    stderrs: Sequence[float] | None = None,
    clusters: Sequence[Hashable] | None = None,
    method: str | None = None,
    level: float = LEVEL,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> ErrorBars:
    """:func:`run_error_bars` over plain numbers: ``scores`` (NaN left out and counted), each
    one's ``stderrs`` (for the variance split) and ``clusters``, in one order."""
    values = np.asarray(scores, dtype=float).reshape(-1)
    method = method or ("clustered" if clusters is not None else "clt")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if method == "clustered" and clusters is None:
        raise ValueError("the clustered interval needs each row's cluster")
    if clusters is not None and len(clusters) != values.size:
        raise ValueError(f"{values.size} scores but {len(clusters)} cluster labels")
    keep = np.isfinite(values)
    x = values[keep]
    n = int(x.size)
    groups = _group_ids(compress(clusters, keep)) if clusters is not None else None
    mean = float(x.mean()) if n else math.nan
    between, within = _variance_parts(x, stderrs, keep)
    if method == "bootstrap":
        stderr, low, high = _bootstrap(x, groups, level, resamples, seed)
    else:
        stderr = _clustered_stderr(x, groups) if groups is not None else _clt_stderr(x)
        half = NormalDist().inv_cdf(0.5 + level / 2.0) * stderr  # 1.96 at 0.95
        low, high = mean - half, mean + half
    nans = int(values.size - n)
    count = int(groups.max() + 1) if groups is not None and n else None  # clusters
    return ErrorBars(mean, stderr, low, high, n, method, between, within, nans, count, level)


def _group_ids(labels: Iterable[Hashable]) -> np.ndarray:
    """Each label's group as 0..G-1, in order of first appearance."""
    index: dict[Hashable, int] = {}
    return np.asarray([index.setdefault(label, len(index)) for label in labels], dtype=int)


def _clt_stderr(x: np.ndarray) -> float:
    """sd(ddof=1) / sqrt(n); NaN under two values."""
    return float(x.std(ddof=1) / math.sqrt(x.size)) if x.size >= 2 else math.nan


def _clustered_stderr(x: np.ndarray, groups: np.ndarray) -> float:
    """Miller's clustered standard error times sqrt(G / (G - 1)), so one row per cluster gives
    the CLT figure exactly; NaN under two clusters."""
    g = int(groups.max()) + 1 if groups.size else 0
    if g < 2:
        return math.nan
    sums = np.bincount(groups, weights=x - x.mean(), minlength=g)
    return float(math.sqrt(float(sums @ sums) * g / (g - 1)) / x.size)


def _bootstrap(
    x: np.ndarray, groups: np.ndarray | None, level: float, resamples: int, seed: int
) -> tuple[float, float, float]:
    """Seeded percentile bootstrap of the mean: whole clusters resampled (rows, without)."""
    if x.size < 2:
        return math.nan, math.nan, math.nan
    groups = np.arange(x.size) if groups is None else groups
    g = int(groups.max()) + 1
    sums, counts = np.bincount(groups, weights=x, minlength=g), np.bincount(groups, minlength=g)
    picks = np.random.default_rng(seed).integers(0, g, size=(resamples, g))
    means = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    return (float(means.std(ddof=1)), *_percentiles(means, level))


def _variance_parts(
    x: np.ndarray, stderrs: Sequence[float] | None, keep: np.ndarray
) -> tuple[float, float]:
    """(between, within): the mean squared per-sample stderr, and the rest of the variance."""
    total = float(x.var(ddof=1)) if x.size >= 2 else math.nan
    if stderrs is None:
        return total, math.nan
    s = np.asarray(stderrs, dtype=float).reshape(-1)[keep]
    s = s[np.isfinite(s)]
    within = float(np.mean(s * s)) if s.size else math.nan
    return (max(total - within, 0.0) if math.isfinite(within) else total), within


def question_key(user_input: Any, id_value: Any = None) -> tuple[str, str]:
    """What pairs rows of two runs: the row's id (when given) and the question's text with
    whitespace collapsed; never the response, which differs between systems."""
    text = " ".join(clean_text(user_input).split()) if isinstance(user_input, str) else ""
    return ("" if id_value is None else str(id_value), text)


@dataclass(frozen=True)
class Pairing:
    """Indices of rows of A and B with the same question, the rows of each alone, and how
    many keys repeat (their k-th rows pair in row order)."""

    pairs: list[tuple[int, int]]
    only_a: list[int]
    only_b: list[int]
    repeated: int = 0


def pair_by_question(keys_a: Sequence[Hashable], keys_b: Sequence[Hashable]) -> Pairing:
    """Pair rows by key, whatever their order: the k-th row of A with a key and of B."""
    left: dict[Hashable, deque[int]] = defaultdict(deque)  # B's rows not paired yet, in order
    for j, key in enumerate(keys_b):
        left[key].append(j)
    pairs, only_a = [], []
    for i, key in enumerate(keys_a):
        if left.get(key):
            pairs.append((i, left[key].popleft()))
        else:
            only_a.append(i)
    only_b = sorted(j for rows in left.values() for j in rows)
    repeated = {k for keys in (keys_a, keys_b) for k, c in Counter(keys).items() if c > 1}
    return Pairing(pairs, only_a, only_b, len(repeated))


@dataclass(frozen=True)
class PairedDifference:
    """B minus A over the pairs both scored: means, difference, interval and p-value."""

    n_pairs: int
    mean_a: float
    mean_b: float
    diff: float
    stderr: float
    ci_low: float
    ci_high: float
    p_value: float
    method: str
    not_scored: int = 0
    clusters: int | None = None
    level: float = LEVEL

    def worse_by_more_than(self, margin: float = 0.0) -> bool:
        """Whether the whole interval of B - A lies below ``-margin``."""
        return math.isfinite(self.ci_high) and self.ci_high < -margin


def paired_difference(
    a: Sequence[float],
    b: Sequence[float],
    *,
    clusters: Sequence[Hashable] | None = None,
    level: float = LEVEL,
) -> PairedDifference:
    """Paired comparison of ``a[i]`` and ``b[i]``: the mean difference and its standard error
    (clustered when ``clusters`` is given)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"{x.size} scores of A but {y.size} of B")
    keep = np.isfinite(x) & np.isfinite(y)
    labels = [c for c, k in zip(clusters, keep, strict=True) if k] if clusters is not None else None
    bars = mean_interval(
        y[keep] - x[keep], clusters=labels, method="clustered" if labels else "clt", level=level
    )
    return PairedDifference(
        n_pairs=bars.n,
        mean_a=float(x[keep].mean()) if bars.n else math.nan,
        mean_b=float(y[keep].mean()) if bars.n else math.nan,
        diff=bars.mean,
        stderr=bars.stderr,
        ci_low=bars.ci_low,
        ci_high=bars.ci_high,
        p_value=_p_value(bars.mean, bars.stderr),
        method=bars.method,
        not_scored=int(x.size - bars.n),
        clusters=bars.clusters,
        level=level,
    )


def _p_value(diff: float, stderr: float) -> float:
    """Two-sided normal p-value of ``diff`` being 0."""
    if not (math.isfinite(diff) and math.isfinite(stderr)):
        return math.nan
    if stderr == 0:
        return 1.0 if diff == 0 else 0.0
    return 2.0 * NormalDist().cdf(-abs(diff) / stderr)


def detectable_drop(
    n: int,
    *,
    between: float,
    within: float,
    strictness_then: int,
    strictness: int,
    correlation: float = 0.5,
    alpha: float = 0.05,
    power: float = POWER,
) -> float:
    """The smallest drop ``n`` pairs find with ``power`` (paired test at ``alpha``): the sd of
    one pair's difference B - A (questions' part 2 (1 - correlation) between, plus the probe
    noise rescaled to ``strictness``) times z(1 - alpha/2) + z(power), over sqrt(n)."""
    variance = 2.0 * (1.0 - correlation) * between + 2.0 * (within * strictness_then) / strictness
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0) + NormalDist().inv_cdf(power)
    return z * math.sqrt(variance) / math.sqrt(n)


def rows_needed(detect: float, **model: float) -> int:
    """Pairs needed to find a drop of ``detect``, ``model`` being :func:`detectable_drop`'s
    keywords: its inverse."""
    return max(2, math.ceil((detectable_drop(1, **model) / detect) ** 2))


@dataclass(frozen=True)
class Threshold:
    """The score best separating good from bad ratings (Youden's J), its bootstrap interval,
    and the share of each group scoring at or above it."""

    threshold: float
    ci_low: float
    ci_high: float
    good_above: float
    bad_above: float
    n_good: int
    n_bad: int
    dropped: int
    resamples: int
    seed: int


def _youden(scores: np.ndarray, good: np.ndarray) -> float:
    """The cut between adjacent scores maximising J (the middle one on a tie); NaN when a
    group is empty."""
    pos, neg = np.sort(scores[good]), np.sort(scores[~good])
    if not pos.size or not neg.size:
        return math.nan
    distinct = np.unique(scores)
    cuts = np.concatenate(([distinct[0]], (distinct[1:] + distinct[:-1]) / 2.0))
    tpr = 1.0 - np.searchsorted(pos, cuts, side="left") / pos.size
    fpr = 1.0 - np.searchsorted(neg, cuts, side="left") / neg.size
    j = tpr - fpr
    best = cuts[np.isclose(j, j.max())]
    return float(best[(best.size - 1) // 2])


def best_threshold(
    scores: Sequence[float],
    good: Sequence[bool],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> Threshold:
    """The threshold separating ``good`` rows best, with a seeded bootstrap interval; rows
    with a NaN score are dropped and counted."""
    s, g = np.asarray(scores, dtype=float), np.asarray(good, dtype=bool)
    if s.shape != g.shape:
        raise ValueError(f"{s.size} scores but {g.size} good/bad labels")
    keep = np.isfinite(s)
    s, g = s[keep], g[keep]
    cut = _youden(s, g)
    low = high = math.nan
    if math.isfinite(cut):
        picks = np.random.default_rng(seed).integers(0, s.size, size=(resamples, s.size))
        values = np.array([_youden(s[p], g[p]) for p in picks])
        values = values[np.isfinite(values)]
        if values.size:
            low, high = _percentiles(values, level)

    def share(v: np.ndarray) -> float:
        return float((v >= cut).mean()) if v.size and math.isfinite(cut) else math.nan

    return Threshold(
        threshold=cut,
        ci_low=low,
        ci_high=high,
        good_above=share(s[g]),
        bad_above=share(s[~g]),
        n_good=int(g.sum()),
        n_bad=int((~g).sum()),
        dropped=int((~keep).sum()),
        resamples=resamples,
        seed=seed,
    )
