"""Do the error bars hold? Simulated runs of a stochastic judge, checked against the truth.

Each simulated question has a true score drawn around a run mean (question-level spread), and
each of its probes' cosines is drawn around that truth (probe-level spread); the clustered runs
add a shared effect per document. The table gives, over ``--runs`` simulated runs each:

* the coverage of the 95% interval of the mean (how often it holds the true mean; target
  93-97%), unclustered and clustered data, with and without ``--cluster``, and the bootstrap;
* the false-alarm rate of ``diff`` on A/A runs (the same questions judged twice; target <= 5%);
* the power of ``diff`` at the drop ``plan`` says 80% power finds (target 75-85%).

It calls the functions the commands call: ``mean_interval`` (``score``/``show``), ``error_bars``
(``plan``), ``paired_difference`` (``diff``), ``detectable_drop`` (``plan``). Usage::

    python benchmarks/error_bars.py [--runs 2000] [--rows 200] [--seed 7]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ragas_relevancy_ext.error_bars import (  # noqa: E402
    ErrorBars,
    detectable_drop,
    mean_interval,
    paired_difference,
    run_error_bars,
)
from ragas_relevancy_ext.scoring.report import Probe, RelevancyReport  # noqa: E402

MEAN = 0.6  # the true mean score of a run
QUESTION_SD = 0.15  # spread of the questions' true scores
PROBE_SD = 0.10  # spread of one probe's cosine around its question's truth
CLUSTER_SD = 0.10  # a document's shared effect (clustered runs)
CLUSTER_SIZE = 5  # questions per document
PROBES = 3  # strictness
CORRELATION = 0.5  # of the two systems' true per-question scores (plan's default)


def probe_cosines(rng: np.random.Generator, truth: np.ndarray, probes: int) -> np.ndarray:
    """Cosines of ``probes`` probes per question: (runs, rows, probes)."""
    return truth[..., None] + PROBE_SD * rng.standard_normal((*truth.shape, probes))


def truths(rng: np.random.Generator, runs: int, rows: int, clustered: bool) -> np.ndarray:
    """True per-question scores (runs, rows); with a shared effect per document if clustered."""
    truth = MEAN + QUESTION_SD * rng.standard_normal((runs, rows))
    if clustered:
        effect = CLUSTER_SD * rng.standard_normal((runs, rows // CLUSTER_SIZE))
        truth += np.repeat(effect, CLUSTER_SIZE, axis=1)
    return truth


def stderrs(cosines: np.ndarray) -> np.ndarray:
    """Each sample's standard error from its probes (as ``score_stderr`` works it out)."""
    return cosines.std(axis=-1, ddof=1) / math.sqrt(cosines.shape[-1])


def coverage(
    rng: np.random.Generator, runs: int, rows: int, clustered: bool, method: str | None
) -> float:
    """Share of runs whose 95% interval of the mean holds the true mean."""
    cosines = probe_cosines(rng, truths(rng, runs, rows, clustered), PROBES)
    scores, errors = cosines.mean(axis=-1), stderrs(cosines)
    labels = np.arange(rows) // CLUSTER_SIZE
    use_clusters = method in ("clustered", "bootstrap-clustered")
    name = "bootstrap" if method and method.startswith("bootstrap") else method
    hits = 0
    for r in range(runs):
        bars = mean_interval(
            scores[r],
            stderrs=errors[r],
            clusters=labels if use_clusters else None,
            method=name,
            resamples=1000,
            seed=r,
        )
        hits += bars.ci_low <= MEAN <= bars.ci_high
    return hits / runs


def pilot_drop(rng: np.random.Generator, rows: int, pilot_rows: int) -> tuple[float, ErrorBars]:
    """The drop ``plan`` says ``rows`` pairs find with 80% power, from a pilot run's reports."""
    cosines = probe_cosines(rng, truths(rng, 1, pilot_rows, False), PROBES)[0]
    reports = [
        RelevancyReport(
            "q",
            "a",
            float(c.mean()),
            PROBES,
            "sim",
            False,
            [Probe(f"p{k}", 0, float(x)) for k, x in enumerate(c)],
        )
        for c in cosines
    ]
    bars = run_error_bars(reports)
    drop = detectable_drop(
        rows,
        between=bars.between_variance,
        within=bars.within_variance,
        strictness_then=PROBES,
        strictness=PROBES,
        correlation=CORRELATION,
    )
    return drop, bars


def paired_runs(
    rng: np.random.Generator, runs: int, rows: int, drop: float, correlation: float
) -> tuple[float, float]:
    """(share of runs where diff exits 1, share with p < 0.05) for B dropping by ``drop``."""
    truth_a = truths(rng, runs, rows, False)
    noise = QUESTION_SD * rng.standard_normal((runs, rows))
    truth_b = MEAN - drop + correlation * (truth_a - MEAN) + math.sqrt(1 - correlation**2) * noise
    a = probe_cosines(rng, truth_a, PROBES).mean(axis=-1)
    b = probe_cosines(rng, truth_b, PROBES).mean(axis=-1)
    fired = significant = 0
    for r in range(runs):
        result = paired_difference(a[r], b[r])
        fired += result.worse_by_more_than(0.0)
        significant += result.p_value < 0.05
    return fired / runs, significant / runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="simulated runs per line")
    parser.add_argument("--rows", type=int, default=200, help="questions per run")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    runs, rows = args.runs, args.rows
    started = time.perf_counter()
    print(
        f"{runs} simulated runs per line, {rows} questions, strictness {PROBES}; true mean "
        f"{MEAN}, question sd {QUESTION_SD}, probe sd {PROBE_SD}; clustered: {rows // CLUSTER_SIZE}"
        f" documents of {CLUSTER_SIZE}, document sd {CLUSTER_SD}",
        file=sys.stderr,
    )
    drop, pilot = pilot_drop(rng, rows, 5000)
    table = [
        (
            "coverage of 95% CI, unclustered data, clt",
            coverage(rng, runs, rows, False, "clt"),
            "93-97%",
        ),
        (
            "coverage of 95% CI, unclustered data, bootstrap",
            coverage(rng, runs, rows, False, "bootstrap"),
            "93-97%",
        ),
        (
            "coverage of 95% CI, clustered data, no --cluster",
            coverage(rng, runs, rows, True, "clt"),
            "(too narrow)",
        ),
        (
            "coverage of 95% CI, clustered data, --cluster",
            coverage(rng, runs, rows, True, "clustered"),
            "93-97%",
        ),
        (
            "coverage of 95% CI, clustered data, --cluster --interval bootstrap",
            coverage(rng, runs, rows, True, "bootstrap-clustered"),
            "93-97%",
        ),
    ]
    aa_exit, aa_p = paired_runs(rng, runs, rows, 0.0, 1.0)
    power_exit, power_p = paired_runs(rng, runs, rows, drop, CORRELATION)
    table += [
        ("diff false alarms on A/A runs (exit 1)", aa_exit, "<= 5%"),
        ("diff A/A runs with p < 0.05 (either way)", aa_p, "~5%"),
        (f"diff power at plan's 80% drop {drop:.4f} (exit 1)", power_exit, "75-85%"),
    ]
    width = max(len(name) for name, _, _ in table)
    print(f"{'measure':<{width}}  {'rate':>6}  target")
    print("-" * (width + 24))
    for name, value, target in table:
        print(f"{name:<{width}}  {value:>6.1%}  {target}")
    print(
        f"\nplan's pilot (5000 rows): between {pilot.between_variance:.5f} "
        f"(true {QUESTION_SD**2:.5f}), within {pilot.within_variance:.5f} "
        f"(true {PROBE_SD**2 / PROBES:.5f}); correlation of A and B {CORRELATION}"
    )
    print(f"done in {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
