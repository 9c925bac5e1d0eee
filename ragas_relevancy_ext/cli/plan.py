"""``ragas-relevancy plan --from A B --detect 0.02``: how many rows a run needs to find a drop.

From earlier runs: the variance of one pair's difference B - A, split into the questions' part
and the probes' (more probes shrink only the latter), and with ``--cluster`` the clusters'
design effect. Two runs (``--from A B``) measure how alike two systems' per-question scores
are; one run cannot, so ``plan REPORT`` assumes ``--correlation`` and says what it costs if the
truth is lower. The power is diff's exit rule's: one-sided at 2.5%, Student's t, past --margin.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from ..scoring.report import RelevancyReport, fmt
from .errors import EXIT_OK, UsageError
from .options import ClusterOpt

__all__ = ["STRICTNESS", "plan"]

STRICTNESS = (1, 2, 3, 5, 8, 12)
ASSUMED = 0.5  # the correlation plan assumes without two runs
LOWER = 0.25  # what it shows the cost of, when assumed


def plan(
    report: Annotated[
        Path | None,
        typer.Argument(metavar="[REPORT]", help="An earlier run's JSONL report (score --out)."),
    ] = None,
    detect: Annotated[
        float, typer.Option(metavar="DROP", help="The drop in mean score to find (above 0).")
    ] = math.nan,
    from_: Annotated[
        tuple[Path, Path] | None,
        typer.Option(
            "--from",
            metavar="A B",
            help="Two earlier runs' reports (as diff takes them): their paired scores measure "
            "the variance of a difference and the correlation.",
        ),
    ] = None,
    correlation: Annotated[
        float | None,
        typer.Option(
            min=-1.0,
            max=1.0,
            metavar="R",
            help=f"With one REPORT: how alike two runs' true per-question scores are (default "
            f"{ASSUMED}; 1, a change that shifts every question alike).",
        ),
    ] = None,
    cluster: ClusterOpt = None,
    margin: Annotated[
        float,
        typer.Option(min=0.0, metavar="M", help="The --margin diff will be run with."),
    ] = 0.0,
) -> int:
    """How many rows a run needs to find a drop.

    Rows (and strictness) to find a drop of --detect with 80% power under diff's exit rule
    (the interval of B - A wholly below -margin: one-sided at 2.5%), from earlier runs.
    """
    from ..error_bars import POWER, PlanModel, detectable_drop, rows_needed
    from .output.console import make_console, print_lines, right, simple_table
    from .saved import SavedRun, cluster_labels

    if not (math.isfinite(detect) and detect > margin):
        raise UsageError(f"--detect must be a drop above the margin ({margin:g}), got {detect}")
    if (report is None) == (from_ is None):
        raise UsageError("give one earlier run (REPORT) or two (--from A B)")
    if from_ is not None and correlation is not None:
        raise UsageError("--from A B measures the correlation: leave --correlation out")
    if from_ is not None:
        from .diff import compare_runs

        c = compare_runs(SavedRun.read(from_[0]), SavedRun.read(from_[1]), None, None)
        ra, rb = [c.a.reports[i] for i, _ in c.pairs], [c.b.reports[j] for _, j in c.pairs]
        labels = None
        if cluster is not None:
            labels = cluster_labels(ra, [c.a.extras[i] for i, _ in c.pairs], cluster)
        then = _strictness(rb)
        model = PlanModel.from_pairs(
            [r.score for r in ra],
            [r.score for r in rb],
            ([r.score_stderr for r in ra], [r.score_stderr for r in rb]),
            (_strictness(ra), then),
            labels,
        )
        n = c.result.n_pairs
        source = f"{from_[0]} and {from_[1]}: {n} pair(s) scored in both"
        alike = f"correlation of paired scores {fmt(c.result.correlation, 2)} (measured)"
    else:
        run = SavedRun.read(report)  # type: ignore[arg-type]
        reports, labels = run.reports, None
        if cluster is not None:
            labels = cluster_labels(reports, run.extras, cluster)
        then, r = _strictness(reports), ASSUMED if correlation is None else correlation
        scores, stderrs = [x.score for x in reports], [x.score_stderr for x in reports]
        model = PlanModel.from_run(scores, stderrs, then, r, labels)
        n = sum(math.isfinite(s) for s in scores)
        source = f"{report}: {n} scored row(s)"
        alike = f"correlation of the two runs' true scores {r:g}"
    if n < 2 or not math.isfinite(model.probes):
        raise UsageError(
            f"{source}: the probes' noise cannot be told from the questions' (at least 2 rows "
            "scored with --strictness 2 or more are needed)"
        )
    if report is not None and correlation is None:
        lower = PlanModel.from_run(scores, stderrs, then, LOWER, labels)
        more = rows_needed(detect, lower, strictness=then, margin=margin)
        alike += (
            f" (assumed, not measured: --from A B measures it; at {LOWER:g} a run needs "
            f"{more:,} rows at strictness {then})"
        )
    options = sorted({*STRICTNESS, then})
    needed = {k: rows_needed(detect, model, strictness=k, margin=margin) for k in options}
    cheapest = min(options, key=lambda k: (needed[k] * k, k))
    table = simple_table(*right("strictness", "rows", "probes judged (rows x strictness)"), "")
    for k in options:
        mark = "<- fewest probes" if k == cheapest else ""
        table.add_row(str(k), f"{needed[k]:,}", f"{needed[k] * k:,}", mark)
    now = detectable_drop(n, model, strictness=then, margin=margin)
    console = make_console()
    design = ""
    if cluster is not None:
        sizes = model.cluster_sizes
        design = (
            f"; --cluster {cluster}: {len(sizes)} clusters of {sum(sizes) / len(sizes):.1f} rows "
            f"on average, intraclass correlation {model.alike:.3f}"
        )
    print_lines(
        console,
        f"from {source} at strictness {then}",
        f"variance of one pair's difference B - A: questions {fmt(model.questions, 5)}, probes "
        f"{fmt(model.probes / then, 5)} at strictness {then}{design}",
        alike,
        f"to find a drop of {detect:g} with {POWER:.0%} power (diff's exit rule: one-sided at "
        f"2.5%, margin {margin:g}):",
    )
    console.print(table)
    print_lines(
        console,
        f"at strictness {then}: {needed[then]:,} rows; {n} rows find a drop of {fmt(now)} with "
        f"{POWER:.0%} power",
    )
    return EXIT_OK


def _strictness(reports: Sequence[RelevancyReport]) -> int:
    """The strictness most scored rows were scored at."""
    counts = Counter(r.strictness for r in reports if math.isfinite(r.score) and r.strictness)
    if not counts:
        raise UsageError("the report does not say the strictness its rows were scored at")
    return counts.most_common(1)[0][0]
