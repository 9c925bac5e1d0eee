"""How sure a score is: error bars on a run's mean and on the change between two runs, the rows
a comparison needs, and the score that best separates good answers from bad.

Intervals use Student's t: n - 1 degrees of freedom for rows, and for rows in clusters the CR2
standard error with Bell and McCaffrey's degrees of freedom, which holds at 10 clusters of unequal
size (``benchmarks/error_bars.py``). After Miller, "Adding Error Bars to Evals" (arXiv 2411.00640).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Any

import numpy as np
from scipy import special  # type: ignore[import-untyped]  # scipy.stats' own, quicker to load

from .scoring.report import clean_text, fmt

__all__ = [
    "FAILURE_ALPHA",
    "FEW_CLUSTERS",
    "METHODS",
    "ErrorBars",
    "Pairing",
    "PairedDifference",
    "PlanModel",
    "Threshold",
    "best_threshold",
    "bootstrap_interval",
    "detectable_drop",
    "interval_text",
    "mean_interval",
    "method_text",
    "p_text",
    "pair_by_question",
    "paired_difference",
    "question_key",
    "rough_text",
    "rows_needed",
    "run_error_bars",
]

METHODS = ("t", "cr2", "bootstrap")
LEVEL = 0.95
# Under this many clusters the interval rests on few independent draws: it still covers (the
# benchmark's 10-cluster cells) but its width swings from run to run, so the output says so.
FEW_CLUSTERS = 30
# A rise in failed rows fails a comparison at this one-sided level (exact McNemar), a tenth of
# the scores' 2.5%: a run compared with itself fails under 3% of the time, while a run failing
# on 30% of 50 rows is caught 99% of the time (benchmarks/error_bars.py).
FAILURE_ALPHA = 0.0025
POWER = 0.8
RESAMPLES = 2000
SEED = 20240611
DRAWS = 200  # runs drawn from an earlier run's clusters to plan over
TINY_P = 1e-16  # p-values below this are printed as "< 1e-16": the arithmetic ends there


def interval_text(low: float, high: float, digits: int = 4) -> str:
    """``[0.7359, 0.8265]``."""
    return f"[{fmt(low, digits)}, {fmt(high, digits)}]"


def p_text(p: float) -> str:
    """``p = 0.0123``, ``p = 3.1e-05`` or ``p < 1e-16``."""
    if math.isfinite(p) and p < TINY_P:
        return f"p < {TINY_P:g}"
    return f"p = {fmt(p) if not math.isfinite(p) or p >= 1e-3 else f'{p:.2g}'}"


def method_text(method: str, clusters: int | None, df: float) -> str:
    """``t, 199 df``, ``CR2 over 12 clusters, 5.3 df`` or ``bootstrap``."""
    how = method if method == "bootstrap" or not clusters else "CR2"
    how += f" over {clusters} clusters" if clusters else ""
    return how + (f", {f'{df:.1f}'.removesuffix('.0')} df" if math.isfinite(df) else "")


def rough_text(clusters: int | None) -> str:
    """``; under 30 clusters: a rough interval`` for few clusters, else ``""``."""
    few = clusters is not None and clusters < FEW_CLUSTERS
    return f"; under {FEW_CLUSTERS} clusters: a rough interval" if few else ""


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
    df: float = math.nan

    def interval_text(self) -> str:
        """``0.7812 ± 0.0231 (95% CI [0.7359, 0.8265], t, 199 df, n=200)``."""
        if not math.isfinite(self.mean):
            return "NaN"
        return (
            f"{self.mean:.4f} ± {fmt(self.stderr)} ({self.level:.0%} CI "
            f"{interval_text(self.ci_low, self.ci_high)}, "
            f"{method_text(self.method, self.clusters, self.df)}, n={self.n}"
            f"{rough_text(self.clusters)})"
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
    one's ``stderrs`` (for the variance split) and ``clusters``, in one order. ``method``: ``t``
    (the default without clusters), ``cr2`` (with them) or ``bootstrap`` (seeded percentile)."""
    values = np.asarray(scores, dtype=float).reshape(-1)
    method = method or ("cr2" if clusters is not None else "t")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if method == "cr2" and clusters is None:
        raise ValueError("the clustered interval needs each row's cluster")
    if clusters is not None and len(clusters) != values.size:
        raise ValueError(f"{values.size} scores but {len(clusters)} cluster labels")
    keep = np.isfinite(values)
    x = values[keep]
    n = int(x.size)
    groups = _group_ids(compress(clusters, keep)) if clusters is not None else None
    mean = float(x.mean()) if n else math.nan
    between, within = _variance_parts(x, stderrs, keep)
    stderr, df = _spread(x, groups)
    if method == "bootstrap":
        stderr, low, high = _bootstrap(x, groups, level, resamples, seed)
        df = math.nan
    else:
        half = float(special.stdtrit(df, 0.5 + level / 2.0)) * stderr if df > 0 else math.nan
        low, high = mean - half, mean + half
    count = int(groups.max() + 1) if groups is not None and n else None  # clusters
    return ErrorBars(
        mean, stderr, low, high, n, method, between, within, values.size - n, count, level, df
    )


def _group_ids(labels: Iterable[Hashable]) -> np.ndarray:
    """Each label's group as 0..G-1, in order of first appearance."""
    index: dict[Hashable, int] = {}
    return np.asarray([index.setdefault(label, len(index)) for label in labels], dtype=int)


def _spread(x: np.ndarray, groups: np.ndarray | None) -> tuple[float, float]:
    """(standard error of the mean, degrees of freedom): sd / sqrt(n) with n - 1, or with
    ``groups`` the CR2 standard error with Bell and McCaffrey's degrees of freedom (a working
    model of independent rows), which are G - 1 for clusters of one size; NaN under 2 of either.

    For the mean alone CR2 is short: cluster g's residual sum S_g over sqrt(1 - n_g / n), and
    the degrees of freedom (tr Q)^2 / |Q|^2 for Q = diag(d) - c c' / n, with d_g = n_g / (1 -
    n_g / n) and c_g^2 = n_g d_g."""
    n = x.size
    if groups is None:
        return (float(x.std(ddof=1) / math.sqrt(n)), float(n - 1)) if n >= 2 else (math.nan, 0.0)
    sizes = np.bincount(groups).astype(float) if n else np.zeros(0)
    if sizes.size < 2:
        return math.nan, 0.0
    sums = np.bincount(groups, weights=x - x.mean())
    stderr = math.sqrt((sums * sums / (1.0 - sizes / n)).sum()) / n
    return stderr, float(_bell_mccaffrey(sizes))


def _bell_mccaffrey(sizes: np.ndarray) -> Any:
    """Bell and McCaffrey's degrees of freedom of a mean over clusters of these ``sizes`` (see
    :func:`_spread`), along the last axis: a size 0 counts for nothing; 0 under 2 clusters."""
    n = sizes.sum(axis=-1, keepdims=True)
    rest = np.where(sizes < n, 1.0 - sizes / n, 1.0)  # a lone cluster: no division by 0
    d, c2 = sizes / rest, sizes * sizes / rest
    n = n[..., 0]
    trace = d.sum(axis=-1) - c2.sum(axis=-1) / n
    square = (d * d).sum(axis=-1) - 2.0 * (d * c2).sum(axis=-1) / n + (c2.sum(axis=-1) / n) ** 2
    return np.divide(trace * trace, square, out=np.zeros_like(trace), where=square > 0)


def _bootstrap(
    x: np.ndarray, groups: np.ndarray | None, level: float, resamples: int, seed: int
) -> tuple[float, float, float]:
    """Seeded percentile bootstrap of the mean (``scipy.stats.bootstrap``): whole clusters
    resampled (rows, without)."""
    from scipy import stats

    groups = np.arange(x.size) if groups is None else groups
    if x.size < 2 or np.max(groups, axis=0) < 1:
        return math.nan, math.nan, math.nan
    sums, sizes = np.bincount(groups, weights=x), np.bincount(groups)
    result = stats.bootstrap(
        (sums, sizes),
        lambda s, c, axis=-1: s.sum(axis=axis) / c.sum(axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=resamples,
        confidence_level=level,
        method="percentile",
        random_state=np.random.default_rng(seed),
    )
    low, high = result.confidence_interval
    return float(result.standard_error), float(low), float(high)


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
    """B minus A over the pairs both scored (means, difference, interval, two-sided p-value,
    the correlation of the paired scores), and the pairs failed (NaN) in one run or both."""

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
    df: float = math.nan
    correlation: float = math.nan
    failed_only_a: int = 0
    failed_only_b: int = 0
    failed_both: int = 0
    failure_p_value: float = 1.0  # exact McNemar, one-sided: B fails more often than A

    def worse_by_more_than(self, margin: float = 0.0) -> bool:
        """Whether the whole interval of B - A lies below ``-margin`` (a one-sided test at
        half of 1 - level)."""
        return math.isfinite(self.ci_high) and self.ci_high < -margin

    def drop_p_value(self, margin: float = 0.0) -> float:
        """One-sided p-value of B - A >= -margin, the exit rule's: below (1 - level) / 2 exactly
        when :meth:`worse_by_more_than`."""
        return _t_tail(self.diff + margin, self.stderr, self.df)

    def failures_rose(self) -> bool:
        """Whether B fails on significantly more of the pairs than A (at :data:`FAILURE_ALPHA`)."""
        return self.failure_p_value < FAILURE_ALPHA


def paired_difference(
    a: Sequence[float],
    b: Sequence[float],
    *,
    clusters: Sequence[Hashable] | None = None,
    level: float = LEVEL,
    failed_as_zero: bool = False,
) -> PairedDifference:
    """Paired comparison of ``a[i]`` and ``b[i]``: the mean difference and its interval (CR2
    when ``clusters`` is given), and the change in failures (NaN): an exact McNemar test on the
    pairs failed in one run only. ``failed_as_zero`` scores a failed row 0 in the difference."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"{x.size} scores of A but {y.size} of B")
    fail_a, fail_b = np.isnan(x), np.isnan(y)
    only_a, only_b = int((fail_a & ~fail_b).sum()), int((fail_b & ~fail_a).sum())
    if failed_as_zero:
        x, y = np.where(fail_a, 0.0, x), np.where(fail_b, 0.0, y)
    keep = np.isfinite(x) & np.isfinite(y)
    labels = [c for c, k in zip(clusters, keep, strict=True) if k] if clusters is not None else None
    bars = mean_interval(y[keep] - x[keep], clusters=labels, level=level)
    # exact McNemar, one-sided: P(at least only_b of the discordant pairs are B's) at 1/2
    p_fail = special.bdtrc(only_b - 1, only_a + only_b, 0.5) if only_b else 1.0
    return PairedDifference(
        n_pairs=bars.n,
        mean_a=float(x[keep].mean()) if bars.n else math.nan,
        mean_b=float(y[keep].mean()) if bars.n else math.nan,
        diff=bars.mean,
        stderr=bars.stderr,
        ci_low=bars.ci_low,
        ci_high=bars.ci_high,
        p_value=min(1.0, 2.0 * _t_tail(-abs(bars.mean), bars.stderr, bars.df)),
        method=bars.method,
        not_scored=int(x.size - bars.n),
        clusters=bars.clusters,
        level=level,
        df=bars.df,
        correlation=_correlation(x[keep], y[keep]),
        failed_only_a=only_a,
        failed_only_b=only_b,
        failed_both=int((fail_a & fail_b).sum()),
        failure_p_value=float(p_fail),
    )


def _t_tail(value: float, stderr: float, df: float) -> float:
    """P(T <= value / stderr) for Student's t with ``df``: 0 or 1 for a difference without
    spread; NaN when unknown."""
    if not (math.isfinite(value) and math.isfinite(stderr) and df > 0):
        return math.nan
    if stderr == 0:
        return 0.0 if value < 0 else 1.0
    return float(special.stdtr(df, value / stderr))


def _correlation(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's r of the paired scores; NaN under 3 pairs or when either run is constant."""
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1])


@dataclass(frozen=True)
class PlanModel:
    """What planning a comparison needs from earlier runs: the variance of one pair's
    difference B - A split into the questions' part and the probes' (at strictness 1: it
    shrinks as 1 / strictness), and in clusters their sizes and how alike the differences in
    one cluster are (the intraclass correlation)."""

    questions: float
    probes: float
    cluster_sizes: tuple[int, ...] = ()
    alike: float = 0.0
    df: float = math.inf  # of the variance's estimate: n - 1 of the earlier pairs
    clusters_df: float = math.inf  # of the design effect's: its Bell and McCaffrey's

    def variance(self, strictness: int) -> float:
        """The variance of one pair's difference at ``strictness`` probes."""
        return self.questions + self.probes / strictness

    def draws(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(variance factors, degrees of freedom) of ``n`` pairs in :data:`DRAWS` seeded
        draws. An estimate on df degrees of freedom could be the truth times df / chi2(df): the
        variance's and, in clusters, the intraclass correlation's. In clusters, those that n
        rows drawn from the earlier run's touch (its clusters copied as often as n rows need)
        set the design effect 1 + alike (sum of squared sizes / n - 1) and Bell and McCaffrey's
        degrees of freedom; else n - 1."""
        rng = np.random.default_rng(SEED)

        def spread(df: float) -> Any:
            return df / rng.chisquare(df, DRAWS) if math.isfinite(df) else np.ones(DRAWS)

        factors = spread(self.df)
        if not self.cluster_sizes:
            return factors, np.full(DRAWS, n - 1.0)
        sizes = np.asarray(self.cluster_sizes)
        colors = np.tile(sizes, -(-n // sizes.sum()))
        drawn = rng.multivariate_hypergeometric(colors, n, size=DRAWS).astype(float)
        alike = self.alike * spread(self.clusters_df)
        effects = 1.0 + alike * ((drawn * drawn).sum(axis=-1) / n - 1.0)
        return factors * effects, _bell_mccaffrey(drawn)

    @classmethod
    def from_run(
        cls,
        scores: Sequence[float],
        stderrs: Sequence[float],
        strictness: int,
        correlation: float,
        clusters: Sequence[Hashable] | None = None,
    ) -> PlanModel:
        """From one earlier run scored at ``strictness``, assuming ``correlation`` between two
        runs' true per-question scores: questions' part 2 (1 - r) between, probes' 2 within;
        clusters as alike as the run's own scores."""
        bars = mean_interval(scores, stderrs=stderrs, clusters=clusters)
        x = np.asarray(scores, dtype=float)
        keep = np.isfinite(x)
        return cls(
            2.0 * (1.0 - correlation) * bars.between_variance,
            2.0 * bars.within_variance * strictness,
            *_design(bars, x[keep], None if clusters is None else list(compress(clusters, keep))),
        )

    @classmethod
    def from_pairs(
        cls,
        a: Sequence[float],
        b: Sequence[float],
        stderrs: tuple[Sequence[float], Sequence[float]],
        strictness: tuple[int, int],
        clusters: Sequence[Hashable] | None = None,
    ) -> PlanModel:
        """From two earlier runs' paired scores (each with its rows' ``stderrs`` and its
        ``strictness``): the variance of B - A less the probes' part, which is each run's mean
        squared stderr; clusters as alike as the differences are."""
        x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        keep = np.isfinite(x) & np.isfinite(y)
        labels = list(compress(clusters, keep)) if clusters is not None else None
        d = y[keep] - x[keep]
        bars = mean_interval(d, clusters=labels)
        noise = [_variance_parts(d, s, keep)[1] for s in stderrs]  # mean squared stderr
        probes = noise[0] * strictness[0] + noise[1] * strictness[1]
        questions = max(float(d.var(ddof=1)) - noise[0] - noise[1], 0.0) if d.size > 1 else math.nan
        return cls(questions, float(probes), *_design(bars, d, labels))


def _design(
    bars: ErrorBars, x: np.ndarray, labels: list[Hashable] | None
) -> tuple[tuple[int, ...], float, float, float]:
    """(cluster sizes, intraclass correlation, its degrees of freedom and the variance's) of
    ``x`` over clusters ``labels``, the correlation from the design effect of its interval
    ``bars``: 1 + alike (sum of squared sizes / n - 1); ((), 0, n - 1, inf) without clusters.
    A correlation below 0 (clusters less alike inside than across) is taken as 0: from few
    clusters it is mostly noise."""
    if labels is None:
        return (), 0.0, x.size - 1.0, math.inf
    sizes = np.bincount(_group_ids(labels))
    variance, spread = float(x.var(ddof=1)) if x.size > 1 else math.nan, (sizes * sizes).sum()
    effect = bars.stderr**2 * x.size / variance if variance > 0 else 1.0
    alike = (effect - 1.0) / (spread / x.size - 1.0) if spread > x.size else 0.0
    return tuple(int(k) for k in sizes), max(float(alike), 0.0), x.size - 1.0, bars.df


def detectable_drop(
    n: int,
    model: PlanModel,
    *,
    strictness: int,
    margin: float = 0.0,
    level: float = LEVEL,
    power: float = POWER,
) -> float:
    """The smallest drop ``n`` pairs find with ``power`` under the exit rule (the interval of
    B - A wholly below ``-margin``: one-sided at (1 - level) / 2), from the noncentral t: its
    mean power over :meth:`PlanModel.draws`. Infinite when that power cannot be reached."""
    from scipy import optimize

    factors, dfs = model.draws(n)
    usable = dfs > 0
    df, critical = dfs[usable], special.stdtrit(dfs[usable], 0.5 + level / 2.0)
    stderrs = np.sqrt(model.variance(strictness) * factors[usable] / n)

    def short(drop: float) -> float:  # the mean power at this drop, less the power asked
        below = special.nctdtr(df, drop / stderrs, critical)  # NaN only where the power is 1
        return float((1.0 - np.nan_to_num(below)).sum() / dfs.size - power)

    high = float(stderrs.max()) if stderrs.size else math.inf
    while not short(high) >= 0:  # doubled until the power is reached
        if high > 1e3:
            return math.inf
        high *= 2.0
    return float(margin + optimize.brentq(short, 0.0, high))


def rows_needed(detect: float, model: PlanModel, **plan: Any) -> int:
    """The fewest pairs that find a drop of ``detect`` (:func:`detectable_drop`'s keywords);
    ``detect`` must exceed the margin."""
    low, high = 1, 2
    while detectable_drop(high, model, **plan) > detect:
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if detectable_drop(mid, model, **plan) > detect else (low, mid)
    return high


def bootstrap_interval(
    x: Any,
    y: Any,
    statistic: Callable[[np.ndarray, np.ndarray], float],
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = SEED,
) -> tuple[float, float]:
    """Seeded percentile bootstrap interval of ``statistic(x, y)`` over resampled pairs;
    resamples where it is undefined (one group, all ratings equal) are left out; NaN under
    three pairs or when every resample is."""
    a, b = np.asarray(x), np.asarray(y)
    if a.size < 3:
        return math.nan, math.nan
    picks = np.random.default_rng(seed).integers(0, a.size, size=(resamples, a.size))
    values = np.array([statistic(a[p], b[p]) for p in picks], dtype=float)
    if not np.isfinite(values).any():
        return math.nan, math.nan
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.nanpercentile(values, [tail, 100.0 - tail])
    return float(low), float(high)


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
    """The threshold separating ``good`` rows best, with a seeded percentile bootstrap interval
    (:func:`bootstrap_interval`); rows with a NaN score are dropped and counted."""
    s, g = np.asarray(scores, dtype=float), np.asarray(good, dtype=bool)
    if s.shape != g.shape:
        raise ValueError(f"{s.size} scores but {g.size} good/bad labels")
    keep = np.isfinite(s)
    s, g = s[keep], g[keep]
    cut = _youden(s, g)
    low, high = bootstrap_interval(s, g, _youden, resamples, level, seed)

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
