"""``ragas-relevancy show``: a report ``score --out`` wrote as the terminal table, every row,
one (``--row N``) or the worst (``--worst K``); no RAGAS, judge or network."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from ..scoring.report import not_scored_cause
from .errors import UsageError, exit_code
from .options import ClusterOpt, Interval, IntervalOpt, TableOpt
from .output import FORMATS, Item, check_outputs
from .output.console import (
    make_console,
    print_causes,
    print_caution,
    print_header,
    print_scores,
    print_summary,
)
from .saved import SavedRun, run_bars

__all__ = ["show"]


def show(
    report: Annotated[
        Path, typer.Argument(metavar="REPORT", help="A JSONL report written by score --out.")
    ],
    row: Annotated[
        int | None, typer.Option(metavar="N", help="Show data row N with its probes and reason.")
    ] = None,
    worst: Annotated[
        int | None,
        typer.Option(
            min=1, metavar="K", help="Show the K lowest rows (NaN first) with probes and reasons."
        ),
    ] = None,
    probes: Annotated[bool, typer.Option(help="Show each row's probes.")] = True,
    table: TableOpt = None,
    html: Annotated[
        Path | None, typer.Option(metavar="PATH", help="Also write an HTML page of the rows shown.")
    ] = None,
    cluster: ClusterOpt = None,
    interval: IntervalOpt = Interval.clt,
) -> int:
    """Print a saved report again, without scoring.

    The terminal table of a JSONL report from score --out. Exit codes as the run's would be.
    """
    from .output.html import worst_rows
    from .score import is_skipped
    from .stats import Summary, summarise, summarise_cost

    if row is not None and worst is not None:
        raise UsageError("give --row or --worst, not both")
    if html is not None:
        html = check_outputs({"html": html}, input_path=report)["html"]
    run = SavedRun.read(report)
    items, meta = list(zip(run.numbers, run.reports, strict=True)), run.meta
    extras = {id(r): extra for r, extra in zip(run.reports, run.extras, strict=True)}
    causes = {n: not_scored_cause(r) for n, r in items}

    def summary_of(rows: Sequence[Item]) -> Summary:
        summary = summarise([(n, r.score, r.user_input) for n, r in rows], causes=causes)
        cost = summarise_cost([r.usage for _, r in rows if not is_skipped(r)])
        bars = run_bars(((r, extras[id(r)]) for _, r in rows), cluster, interval)
        return replace(summary, cost=cost, error_bars=bars)

    chosen, showing = items, f"all {len(items)} row(s)"
    if row is not None:
        chosen, showing = [(n, r) for n, r in items if n == row], f"row {row}"
        if not chosen:
            numbers = sorted({n for n, _ in items})
            raise UsageError(f"{report}: no row {row} (rows {numbers[0]}-{numbers[-1]})")
    elif worst is not None:
        chosen = worst_rows(items, worst)[0]
        showing = f"the {len(chosen)} lowest of {len(items)} row(s), NaN first"
    console = make_console()
    fields = {k: v for k, v in meta.items() if k != "caution"}
    print_header(console, {**fields, "showing": showing})
    if table is not False:
        reasons = row is not None or worst is not None
        print_scores(console, chosen, probes, reasons, rows=max(n for n, _ in chosen))
    summary = summary_of(items)
    if row is None:
        print_summary(console, summary, dict(items))
        print_causes(make_console(stderr=True), items)
    print_caution(console, meta)
    if html is not None:
        FORMATS["html"].writer()(html, chosen, summary_of(chosen), meta)
        console.print(f"wrote {html}", soft_wrap=True)
    return exit_code(summary.scored, summary.n)
