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
from typing import Annotated, Any

import typer

from ..scoring.report import RelevancyReport, not_scored_cause
from .errors import UsageError, exit_code
from .options import TableOpt
from .output.console import (
    OFFLINE_CAUTION,
    make_console,
    print_causes,
    print_caution,
    print_header,
    print_summary,
    print_table,
)
from .output.jsonl import load_record

__all__ = ["read_saved", "show", "worst_first"]

# What a line needs to be shown when an older or newer writer left a field out.
_FILLERS: dict[str, Any] = {
    "user_input": "",
    "response": "",
    "strictness": 0,
    "probe_prompt": "",
    "all_noncommittal": False,
}


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
    items, meta = read_saved(report)
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
    summary = replace(summary, cost=summarise_cost(usages))
    if row is None:
        print_summary(console, summary, dict(items))
        print_causes(make_console(stderr=True), items)
    print_caution(console, meta)
    if html is not None:
        from .output import FORMATS

        shown = summarise([(n, r.score, r.user_input) for n, r in chosen], causes=causes)
        shown = replace(
            shown, cost=summarise_cost([r.usage for _, r in chosen if not is_skipped(r)])
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


def read_saved(path: Path) -> tuple[list[tuple[int, RelevancyReport]], dict[str, str]]:
    """(row, report) pairs in row order, and what the run used, from a JSONL report.

    A later line for the same row and input replaces an earlier one (a re-run retried it);
    JSON objects without a ``row`` (a header) are passed over; a line cut off mid-write at the
    end is left out; any other line that is not a report line is a :class:`UsageError`.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    text = raw.decode("utf-8", errors="replace")
    lines = text.splitlines()
    if lines and not text.endswith("\n"):
        lines.pop()  # cut off mid-write
    records: dict[tuple[int, str], dict[str, Any]] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = load_record(line)
        except (ValueError, RecursionError):
            raise UsageError(f"{path}: line {number} is not a report line") from None
        if not isinstance(record, dict):
            raise UsageError(f"{path}: line {number} is not a report line")
        if "row" not in record:
            continue
        records[(int(record["row"]), str(record.get("key", "")))] = record
    ordered = sorted(records.items(), key=lambda item: item[0])
    items = [(number, _report(record)) for (number, _), record in ordered]
    return items, _meta(path, [record for _, record in ordered])


def _report(record: dict[str, Any]) -> RelevancyReport:
    values = {**_FILLERS, **record}
    return RelevancyReport.from_dict(values)


def _meta(path: Path, records: list[dict[str, Any]]) -> dict[str, str]:
    meta = {"report": f"{path} ({len(records)} row(s))"}
    for field in ("judge", "embeddings"):
        seen = sorted({str(r[field]) for r in records if r.get(field)})
        if seen:
            meta[field] = seen[0] if len(seen) == 1 else "mixed: " + "; ".join(seen)
    if any(str(r.get("judge", "")).startswith("offline") for r in records):
        meta["caution"] = OFFLINE_CAUTION
    return meta
