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
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from ..scoring.report import RelevancyReport, fmt
from .errors import EXIT_OK, UsageError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["STRICTNESS", "plan"]

STRICTNESS = (1, 2, 3, 5, 8, 12)


def plan(
    report: Annotated[
        Path, typer.Argument(metavar="REPORT", help="An earlier run's JSONL report (score --out).")
    ],
    detect: Annotated[
        float,
        typer.Option(metavar="DROP", help="The drop in mean score to find (above 0)."),
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
    parts = {"between": bars.between_variance, "within": bars.within_variance}
    console = _console()
    console.print(
        Text(
            f"from {report}: {bars.n} scored row(s) at strictness {then} | mean "
            f"{bars.interval_text()}"
        )
    )
    console.print(Text(f"{bars.variance_text()}; correlation of the two runs {correlation:g}"))
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name in ("strictness", "rows", "probes judged (rows x strictness)"):
        table.add_column(name, justify="right")
    table.add_column("")
    options = sorted({*STRICTNESS, then})
    needed = {
        k: rows_needed(
            detect,
            between=parts["between"],
            within=parts["within"],
            strictness_then=then,
            strictness=k,
            correlation=correlation,
        )
        for k in options
    }
    cheapest = min(options, key=lambda k: (needed[k] * k, k))
    for k in options:
        mark = "<- fewest probes" if k == cheapest else ""
        table.add_row(str(k), f"{needed[k]:,}", f"{needed[k] * k:,}", mark)
    console.print(
        Text(
            f"to find a drop of {detect:g} with {POWER:.0%} power (paired, two-sided, alpha 0.05):"
        )
    )
    console.print(table)
    now = detectable_drop(
        bars.n,
        between=parts["between"],
        within=parts["within"],
        strictness_then=then,
        strictness=then,
        correlation=correlation,
    )
    console.print(
        Text(
            f"at strictness {then}: {needed[then]:,} rows; this run's {bars.n} rows find a drop of "
            f"{fmt(now)} with {POWER:.0%} power"
        )
    )
    return EXIT_OK


def _strictness(reports: Sequence[RelevancyReport]) -> int:
    """The strictness most scored rows were scored at."""
    counts = Counter(r.strictness for r in reports if math.isfinite(r.score) and r.strictness)
    if not counts:
        raise UsageError("the report does not say the strictness its rows were scored at")
    return counts.most_common(1)[0][0]


def _console() -> Console:
    from .output.console import make_console

    return make_console()
