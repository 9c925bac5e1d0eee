"""``ragas-relevancy show``: a saved JSONL report as the terminal table, without scoring again.

Reads what ``score --out`` wrote: every line, or one row (``--row N``), or the worst rows
(``--worst K``) with their probes and reasons. Only the standard library, rich and the report
module load: no RAGAS, no judge, no network.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from ..scoring.report import RelevancyReport, not_scored_cause
from .errors import UsageError, exit_code
from .options import ClusterOpt, Interval, IntervalOpt, TableOpt
from .output.console import (
    make_console,
    print_causes,
    print_caution,
    print_header,
    print_summary,
    print_table,
)
from .saved import extra_of, meta_of, read_records, report_of, run_bars

__all__ = ["show", "worst_first"]

# What a line needs to be shown when an older or newer writer left a field out.


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
    from .score import is_skipped
    from .stats import summarise, summarise_cost

    if row is not None and worst is not None:
        raise UsageError("give --row or --worst, not both")
    if html is not None:
        from .output import check_outputs

        html = check_outputs({"html": html}, input_path=report)["html"]
    records = read_records(report)
    items = [(int(record["row"]), report_of(record)) for record in records]
    meta = meta_of(report, records)
    extras = {id(r): extra_of(record) for (_, r), record in zip(items, records, strict=True)}
    if not items:
        raise UsageError(f"{report}: no report lines")
    chosen = items
    if row is not None:
        chosen = [(n, r) for n, r in items if n == row]
        if not chosen:
            numbers = sorted({n for n, _ in items})
            raise UsageError(f"{report}: no row {row} (rows {numbers[0]}-{numbers[-1]})")
    elif worst is not None:
        chosen = worst_first(items)[:worst]
    console = make_console()
    fields = {k: v for k, v in meta.items() if k != "caution"}
    print_header(console, {**fields, "showing": _showing(row, worst, len(chosen), len(items))})
    if table is not False:
        reasons = row is not None or worst is not None
        print_table(console, chosen, probes=probes, reasons=reasons)
    causes = {n: not_scored_cause(r) for n, r in items}
    summary = summarise([(n, r.score, r.user_input) for n, r in items], causes=causes)
    usages = [r.usage for _, r in items if not is_skipped(r)]
    bars = run_bars(((r, extras[id(r)]) for _, r in items), cluster, interval)
    summary = replace(summary, cost=summarise_cost(usages), error_bars=bars)
    if row is None:
        print_summary(console, summary, dict(items))
        print_causes(make_console(stderr=True), items)
    print_caution(console, meta)
    if html is not None:
        from .output import FORMATS

        shown = summarise([(n, r.score, r.user_input) for n, r in chosen], causes=causes)
        shown = replace(
            shown,
            cost=summarise_cost([r.usage for _, r in chosen if not is_skipped(r)]),
            error_bars=run_bars(((r, extras[id(r)]) for _, r in chosen), cluster, interval),
        )
        FORMATS["html"].writer()(html, chosen, shown, meta)
        console.print(f"wrote {html}", soft_wrap=True)
    return exit_code(summary.scored, summary.n)


def _showing(row: int | None, worst: int | None, shown: int, total: int) -> str:
    if row is not None:
        return f"row {row}"
    if worst is not None:
        return f"the {shown} lowest of {total} row(s), NaN first"
    return f"all {total} row(s)"


def worst_first(
    items: Iterable[tuple[int, RelevancyReport]],
) -> list[tuple[int, RelevancyReport]]:
    """Rows not scored (NaN) first, then by score from the lowest, ties by row number."""

    def rank(item: tuple[int, RelevancyReport]) -> tuple[bool, float, int]:
        score = item[1].score
        finite = score is not None and math.isfinite(score)
        return (finite, score if finite else 0.0, item[0])

    return sorted(items, key=rank)
