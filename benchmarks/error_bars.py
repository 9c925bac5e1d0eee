"""Do the error bars hold? Simulated runs, checked against the truth they were drawn from.

Each simulated question has a latent ease s ~ N(0, 1); a run's true score for it is
MEAN + QUESTION_SD * s (plus, over documents, a shared effect per document), each of its 3
probes' cosines is that plus PROBE_SD noise, and the row scores 0 (every probe noncommittal)
with probability Phi(ZERO_AT - ZERO_SLOPE * s): a mass of zeros (17%), mostly on hard
questions. Every row fails (NaN) with probability FAILED in each run, at random. Questions come
from documents of unequal size (lognormal weights, sd DOCUMENT_SPREAD: at 40 documents the
largest holds 36 times the smallest's share). A second system's latent ease correlates
CORRELATION with the first's, and its change varies by document (CHANGE_SD).

For n in {5, 10, 20, 50, 200, 1000} and no documents, 10 or 40, over --reps replications:

* coverage: how often the 95% interval of a run's mean (``score``'s summary; CR2 by document
  with documents) holds the true mean; and without ``--cluster`` on the same runs;
* A/A exit 1: how often ``diff``'s rule (scores' interval below 0, or failures' exact McNemar
  test) fires on the same system scored twice;
* power: how often it fires at the drop ``plan --from A B`` says n pairs find with 80% power
  (the median is shown), from 200 plans each made from its own earlier pair of runs of 10 n (at
  least 5,000) questions on the same documents, each plan used for reps / 200 replications;
  with every score of B that much lower (as plan assumes), and with B's truth that much lower
  ("lowered": its scores are lower and less spread, so the power is higher);
* 30% failed: how often it fires when B fails on A's 30% lowest-scored questions.

It calls what the commands call: ``mean_interval``, ``paired_difference`` (and its verdicts),
``PlanModel.from_pairs`` and ``detectable_drop``. About 12 minutes on a loaded 2-core machine at
2,000 replications; ``--reps 200`` for a quick look. The same seed prints the same table. Usage::

    python benchmarks/error_bars.py [--reps 2000] [--seed 7]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ragas_relevancy_ext.error_bars import (  # noqa: E402
    FEW_CLUSTERS,
    PlanModel,
    detectable_drop,
    mean_interval,
    paired_difference,
)

MEAN = 0.62  # a probe cosine's mean on an average question
QUESTION_SD = 0.15  # spread of questions' true scores
PROBE_SD = 0.10  # a probe's cosine around its question's truth
PROBES = 3  # strictness
ZERO_AT, ZERO_SLOPE = -1.3, 0.9  # P(every probe noncommittal) = Phi(ZERO_AT - ZERO_SLOPE * s)
FAILED = 0.01  # a row's chance of failing (NaN) in a run
DOCUMENT_SD = 0.10  # a document's shared effect on its questions' scores
DOCUMENT_SPREAD = 0.8  # sd of log document weights
CORRELATION = 0.3  # of two systems' latent ease per question
CHANGE_SD = 0.05  # how much a change varies from document to document
SIZES = (5, 10, 20, 50, 200, 1000)
PLANS = 200  # plans a cell's power is measured at: planning is most of the benchmark's time
DOCUMENTS = (0, 10, 40)


def zero_share() -> tuple[float, float]:
    """(share of rows scored 0, true mean score), by Gauss-Hermite quadrature over s."""
    s, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / w.sum()
    kept = 1.0 - stats.norm.cdf(ZERO_AT - ZERO_SLOPE * s)
    return float(1.0 - w @ kept), float(w @ (kept * (MEAN + QUESTION_SD * s)))


def documents(rng: np.random.Generator, shape: tuple[int, int], count: int) -> np.ndarray | None:
    """Each row's document (reps, n), drawn with unequal (lognormal) weights; None for none."""
    if not count:
        return None
    weights = np.exp(DOCUMENT_SPREAD * stats.norm.ppf((np.arange(count) + 0.5) / count))
    return rng.choice(count, size=shape, p=weights / weights.sum())


def scores(
    rng: np.random.Generator,
    ease: np.ndarray,
    shift: np.ndarray | float,
    docs: np.ndarray | None,
    count: int,
    effect: np.ndarray | None,
) -> np.ndarray:
    """One run's scores (reps, n): probes around each truth, the zeros and the failures."""
    truth = MEAN + QUESTION_SD * ease + shift
    if docs is not None and effect is not None:
        truth = truth + np.take_along_axis(effect, docs, axis=1)
    cosines = truth[..., None] + PROBE_SD * rng.standard_normal((*truth.shape, PROBES))
    out = cosines.mean(axis=-1)
    out[rng.random(out.shape) < stats.norm.cdf(ZERO_AT - ZERO_SLOPE * ease)] = 0.0
    out[rng.random(out.shape) < FAILED] = np.nan
    return out


def pair(
    rng: np.random.Generator,
    reps: int,
    n: int,
    count: int,
    drop: np.ndarray | float = 0.0,
    same: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Scores of runs A and B of ``reps`` replications, their documents; ``same``: B is A's
    system scored again, else another system ``drop`` lower on average."""
    docs = documents(rng, (reps, n), count)
    shared = DOCUMENT_SD * rng.standard_normal((reps, max(count, 1)))
    ease = rng.standard_normal((reps, n))
    a = scores(rng, ease, 0.0, docs, count, shared)
    if same:
        return a, scores(rng, ease, 0.0, docs, count, shared), docs
    other = CORRELATION * ease + math.sqrt(1 - CORRELATION**2) * rng.standard_normal((reps, n))
    change = shared + CHANGE_SD * rng.standard_normal((reps, max(count, 1)))
    return a, scores(rng, other, -drop / (1 - ZEROS), docs, count, change), docs


ZEROS, TRUTH = zero_share()


def planned_drops(rng: np.random.Generator, reps: int, n: int, count: int) -> np.ndarray:
    """``reps`` drops ``plan --from A B`` says n pairs find with 80% power, each from its own
    earlier pair of runs of 10 n (at least 5,000) questions on the same documents."""
    size = max(5000, 10 * n)
    stderr = np.full(size, PROBE_SD / math.sqrt(PROBES))  # every row's probes' noise
    drops = np.empty(reps)
    for r in range(reps):
        a, b, docs = pair(rng, 1, size, count)
        labels = None if docs is None else docs[0]
        model = PlanModel.from_pairs(a[0], b[0], (stderr, stderr), (PROBES, PROBES), labels)
        drops[r] = detectable_drop(n, model, strictness=PROBES)
    return drops


def cell(rng: np.random.Generator, reps: int, n: int, count: int) -> dict[str, float]:
    """Every measure of one cell (n rows, ``count`` documents)."""
    docs = documents(rng, (reps, n), count)
    shared = DOCUMENT_SD * rng.standard_normal((reps, max(count, 1)))
    one = scores(rng, rng.standard_normal((reps, n)), 0.0, docs, count, shared)
    covered = plain = seen = warned = 0
    for r in range(reps):
        labels = None if docs is None else docs[r]
        bars = mean_interval(one[r], clusters=labels)
        covered += bars.ci_low <= TRUTH <= bars.ci_high
        seen += bars.clusters or 0
        warned += bool(bars.clusters and bars.clusters < FEW_CLUSTERS)
        if labels is not None:
            t = mean_interval(one[r])
            plain += t.ci_low <= TRUTH <= t.ci_high

    def exits(a: np.ndarray, b: np.ndarray, docs: np.ndarray | None) -> float:
        fired = 0
        for r in range(reps):
            labels = None if docs is None else docs[r]
            result = paired_difference(a[r], b[r], clusters=labels)
            fired += result.worse_by_more_than(0.0) or result.failures_rose()
        return fired / reps

    same = pair(rng, reps, n, count, same=True)
    drop = np.resize(planned_drops(rng, min(reps, PLANS), n, count), reps)
    lower = pair(rng, reps, n, count, drop=drop[:, None])
    a, b, other_docs = pair(rng, reps, n, count)
    shifted = (a, b - drop[:, None], other_docs)  # every score of B that much lower, as plan has
    broken_a, broken_b, broken_docs = pair(rng, reps, n, count, same=True)
    hardest = np.argsort(np.nan_to_num(broken_a, nan=np.inf), axis=1)[:, : round(0.3 * n)]
    np.put_along_axis(broken_b, hardest, np.nan, axis=1)
    return {
        "clusters": seen / reps,
        "warns": warned / reps,
        "coverage": covered / reps,
        "plain": plain / reps if docs is not None else math.nan,
        "aa": exits(*same),
        "drop": float(np.median(drop)),
        "power": exits(*shifted),
        "lowered": exits(*lower),
        "broken": exits(broken_a, broken_b, broken_docs),
    }


def few_clusters(rng: np.random.Generator, reps: int, n: int = 200) -> None:
    """Where the clustered interval holds: coverage at 3 to 80 documents, the interval's width
    from run to run (coefficient of variation), and the former interval's coverage (Miller's
    clustered standard error times sqrt(G / (G - 1)), normal quantiles)."""
    print(f"\n{n} rows over few documents: the clustered interval")
    print(f"{'docs':>5} {'seen':>5} {'df':>5} {'coverage':>8} {'width cv':>8} {'former':>7}")
    for count in (3, 5, 10, 20, 30, 40, 80):
        docs = documents(rng, (reps, n), count)
        shared = DOCUMENT_SD * rng.standard_normal((reps, count))
        runs = scores(rng, rng.standard_normal((reps, n)), 0.0, docs, count, shared)
        hit = former = seen = df = 0.0
        widths = []
        for r in range(reps):
            bars = mean_interval(runs[r], clusters=docs[r])
            hit += bars.ci_low <= TRUTH <= bars.ci_high
            seen, df = seen + (bars.clusters or 0), df + bars.df
            widths.append(bars.ci_high - bars.ci_low)
            keep = np.isfinite(runs[r])
            x, g = runs[r][keep], docs[r][keep]
            sums = np.bincount(g, weights=x - x.mean())
            k = np.count_nonzero(np.bincount(g))
            half = 1.96 * math.sqrt(sums @ sums * k / (k - 1)) / x.size
            former += abs(x.mean() - TRUTH) <= half
        cv = np.std(widths) / np.mean(widths)
        print(
            f"{count:>5} {seen / reps:>5.1f} {df / reps:>5.1f} {hit / reps:>8.1%} {cv:>8.2f} "
            f"{former / reps:>7.1%}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000, help="replications per cell")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    print(
        f"{args.reps} replications a cell; true mean {TRUTH:.4f}, {ZEROS:.0%} of rows scored 0, "
        f"{FAILED:.0%} failed at random; strictness {PROBES}",
        file=sys.stderr,
    )
    head = (
        f"{'n':>5} {'docs':>4} {'seen':>5} {'warns':>6} {'coverage':>8} {'no --cluster':>12} "
        f"{'A/A exit 1':>10} {'plan drop':>9} {'power':>6} {'lowered':>7} {'30% failed':>10}"
    )
    print(head)
    print("-" * len(head))
    for n in SIZES:
        for count in DOCUMENTS:
            m = cell(rng, args.reps, n, count)
            plain = f"{m['plain']:>12.1%}" if count else f"{'':>12}"
            print(
                f"{n:>5} {count or '-':>4} {m['clusters']:>5.1f} {m['warns']:>6.0%} "
                f"{m['coverage']:>8.1%} {plain} {m['aa']:>10.1%} {m['drop']:>9.4f} "
                f"{m['power']:>6.1%} {m['lowered']:>7.1%} {m['broken']:>10.1%}",
                flush=True,
            )
            print(
                f"  n={n} documents={count}: {time.perf_counter() - started:.0f} s", file=sys.stderr
            )
    print(
        "targets: coverage 93-97% (n >= 20, no documents or 40), >= 90% elsewhere; A/A exit 1 "
        "<= 3%; power 75-85%; 30% failed exits 1 in >= 95%"
    )
    few_clusters(rng, args.reps)


if __name__ == "__main__":
    main()
