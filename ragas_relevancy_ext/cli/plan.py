"""``ragas-relevancy plan REPORT --detect 0.02``: how many rows a run needs to find a drop.

From an earlier run's variance parts (between questions, and within: the probes' noise), the
rows a paired comparison needs to find a drop of ``--detect`` with 80% power (two-sided, alpha
0.05), at several strictness values: more probes shrink only the within part. How alike two
systems' per-question scores are is not in one run: ``--correlation`` (default 0.5) says it.
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

__all__ = ["STRICTNESS", "plan"]

STRICTNESS = (1, 2, 3, 5, 8, 12)


def plan(
    report: Annotated[
        Path, typer.Argument(metavar="REPORT", help="An earlier run's JSONL report (score --out).")
    ],
    detect: Annotated[
        float, typer.Option(metavar="DROP", help="The drop in mean score to find (above 0).")
    ],
    correlation: Annotated[
        float,
        typer.Option(
            min=-1.0,
            max=1.0,
            metavar="R",
            help="How alike the two runs' true per-question scores are: 1, a change that shifts "
            "every question alike (only probe noise is left); 0, unrelated.",
        ),
    ] = 0.5,
) -> int:
    """How many rows a run needs to find a drop.

    Rows (and strictness) to find a drop of --detect with 80% power: paired, two-sided,
    alpha 0.05, from the variance parts of an earlier run.
    """
    from ..error_bars import POWER, detectable_drop, rows_needed, run_error_bars
    from .output.console import make_console, print_lines, right, simple_table
    from .saved import SavedRun

    if not (math.isfinite(detect) and detect > 0):
        raise UsageError(f"--detect must be a drop above 0, got {detect}")
    run = SavedRun.read(report)
    bars = run_error_bars(run.reports)
    if bars.n < 2:
        raise UsageError(f"{report}: {bars.n} scored row(s); at least 2 are needed")
    if not math.isfinite(bars.within_variance):
        raise UsageError(
            f"{report}: no scored row has two probes or more, so the probes' noise cannot be "
            "told from the questions'; plan from a run scored with --strictness 2 or more"
        )
    then = _strictness(run.reports)
    model = {"between": bars.between_variance, "within": bars.within_variance}
    model.update(strictness_then=then, correlation=correlation)
    options = sorted({*STRICTNESS, then})
    needed = {k: rows_needed(detect, strictness=k, **model) for k in options}
    cheapest = min(options, key=lambda k: (needed[k] * k, k))
    table = simple_table(*right("strictness", "rows", "probes judged (rows x strictness)"), "")
    for k in options:
        mark = "<- fewest probes" if k == cheapest else ""
        table.add_row(str(k), f"{needed[k]:,}", f"{needed[k] * k:,}", mark)
    now = detectable_drop(bars.n, strictness=then, **model)
    console = make_console()
    print_lines(
        console,
        f"from {report}: {bars.n} scored row(s) at strictness {then} | mean {bars.interval_text()}",
        f"{bars.variance_text()}; correlation of the two runs {correlation:g}",
        f"to find a drop of {detect:g} with {POWER:.0%} power (paired, two-sided, alpha 0.05):",
    )
    console.print(table)
    print_lines(
        console,
        f"at strictness {then}: {needed[then]:,} rows; this run's {bars.n} rows find a drop of "
        f"{fmt(now)} with {POWER:.0%} power",
    )
    return EXIT_OK


def _strictness(reports: Sequence[RelevancyReport]) -> int:
    """The strictness most scored rows were scored at."""
    counts = Counter(r.strictness for r in reports if math.isfinite(r.score) and r.strictness)
    if not counts:
        raise UsageError("the report does not say the strictness its rows were scored at")
    return counts.most_common(1)[0][0]
