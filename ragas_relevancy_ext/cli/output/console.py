"""What the commands print: rich tables of scores and probes, summaries, and a progress bar.

Text from the data is always passed as :class:`rich.text.Text`, never as markup, so brackets
in a response print as they are.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ...report import DRIFT_GAP, RelevancyReport, clip, fmt

if TYPE_CHECKING:
    from ..stats import Agreement, Spread, Summary

PIPED_WIDTH = 120


def make_console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr) that reads no markup, 120 columns wide when piped."""
    stream = sys.stderr if stderr else sys.stdout
    console = Console(file=stream, highlight=False, markup=False, soft_wrap=True)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(
            file=stream, highlight=False, markup=False, soft_wrap=True, width=PIPED_WIDTH
        )
    return console


def print_header(console: Console, fields: Mapping[str, str]) -> None:
    """``name: value`` lines saying what the run used."""
    for name, value in fields.items():
        line = Text(f"{name}: ", style="dim")
        line.append(value)
        console.print(line)


def run_fields(data: Any, setup: Any, **extra: str) -> dict[str, str]:
    """What a run read and used: file, judge, embeddings, probe prompt (plus ``extra``)."""
    settings = setup.settings
    return {
        "file": f"{data.path} ({len(data.rows)} row(s), {len(data.bad)} bad)",
        "judge": setup.judge_label,
        "embeddings": setup.embeddings.label,
        "probes": f"{settings.probe_prompt} prompt, strictness {settings.strictness}",
        **extra,
    }


def scores_table(items: Sequence[tuple[int, RelevancyReport]], probes: bool = True) -> Table:
    """One line per sample (row, score, question), its response and probes beneath it."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("row", justify="right", style="dim", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("cosine", justify="right", no_wrap=True)
    table.add_column("question, response (>), probes (nc = noncommittal)")
    for number, report in items:
        table.add_row(
            str(number),
            Text(fmt(report.score), style=_score_style(report.score)),
            "",
            Text(clip(report.user_input, 300), style="bold"),
        )
        table.add_row("", "", "", Text("> " + clip(report.response, 300), style="dim"))
        if probes:
            best = max((p.cosine for p in report.probes), default=0.0)
            for probe in report.probes:
                line = Text(probe.question)
                if probe.noncommittal:
                    line.append("  nc", style="yellow")
                if probe.cosine < best - DRIFT_GAP:
                    line.append("  drifted", style="magenta")
                table.add_row("", "", fmt(probe.cosine, 2), line)
            for note in report.notes:
                table.add_row("", "", "", Text(f"note: {note}", style="yellow"))
        if report.error or not report.probes or report.all_noncommittal:
            table.add_row("", "", "", Text(report.reason, style="red"))
        table.add_section()
    return table


def _score_style(score: float) -> str:
    if not math.isfinite(score):
        return "red"
    return "red" if score < 0.5 else "yellow" if score < 0.75 else "green"


def print_summary(console: Console, summary: Summary) -> None:
    """Mean, median, zeros, NaNs and the lowest scores."""
    console.print(
        Text(
            f"{summary.n} sample(s), {summary.scored} scored | mean {fmt(summary.mean)} | "
            f"median {fmt(summary.median)} | score 0: {summary.zeros} | NaN: {summary.nans_text()}",
            style="bold",
        )
    )
    if summary.lowest:
        console.print(Text(f"lowest {len(summary.lowest)}:", style="dim"))
        for low in summary.lowest:
            console.print(
                Text(f"  row {low.number:>4}  {fmt(low.score)}  {clip(low.user_input, 90)}")
            )


def print_bad_rows(console: Console, lines: Sequence[str], skipped: int) -> None:
    """The rows that were set aside, by line number."""
    if not lines:
        return
    console.print(Text(f"skipped {skipped} bad row(s):", style="yellow"))
    for line in lines:
        console.print(Text(f"  {line}"))


@contextlib.contextmanager
def progress_bar(total: int, label: str, enabled: bool) -> Iterator[Callable[[], None]]:
    """A transient bar on stderr; yields a function to call once per finished sample."""
    console = Console(file=sys.stderr)
    if not enabled or total < 2 or not console.is_terminal:
        yield lambda: None
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda: bar.advance(task)


def compare_table(rows: Sequence[tuple[int, str, float | None, float, bool, str | None]]) -> Table:
    """Rows of (row, question, stock, ours, same prompts, stock error) side by side."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("row", justify="right", style="dim")
    table.add_column("stock", justify="right")
    table.add_column("ours (stock mode)", justify="right")
    table.add_column("|difference|", justify="right")
    table.add_column("same prompts", justify="center")
    table.add_column("question")
    for number, question, stock, ours, same, error in rows:
        diff = None if stock is None else abs(stock - ours)
        table.add_row(
            str(number),
            fmt(stock, 6) if error is None else Text("failed", style="red"),
            fmt(ours, 6),
            "-" if diff is None else Text(f"{diff:.2e}", style=_diff_style(diff)),
            "yes" if same else Text("no", style="red"),
            Text(clip(question, 60) + (f"  (stock: {error})" if error else "")),
        )
    return table


def _diff_style(diff: float) -> str:
    return "red" if not math.isfinite(diff) or diff > 1e-9 else "green"


def print_agreement(console: Console, agreement: Agreement, ratings: str) -> None:
    """Pearson and Spearman with their bootstrap intervals."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column(f"score vs {ratings}")
    table.add_column("r", justify="right")
    table.add_column("95% interval", justify="right")
    for name, value, (low, high) in (
        ("Pearson", agreement.pearson, agreement.pearson_interval),
        ("Spearman", agreement.spearman, agreement.spearman_interval),
    ):
        table.add_row(name, fmt(value, 3), f"[{fmt(low, 3)}, {fmt(high, 3)}]")
    console.print(table)
    dropped = f"; {agreement.dropped} NaN score(s) left out" if agreement.dropped else ""
    console.print(
        Text(
            f"n = {agreement.n} pair(s){dropped}; percentile bootstrap, "
            f"{agreement.resamples} resamples, seed {agreement.seed}",
            style="dim",
        )
    )


def print_spread(
    console: Console, numbers: Sequence[int], questions: Sequence[str], spread: Spread
) -> None:
    """Per-sample mean and standard deviation over repeats, largest first, then the mean."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("row", justify="right", style="dim")
    table.add_column("mean", justify="right")
    table.add_column("std", justify="right")
    table.add_column("question")
    order = sorted(
        range(len(numbers)),
        key=lambda i: (-spread.deviations[i] if math.isfinite(spread.deviations[i]) else 1, i),
    )
    for i in order:
        table.add_row(
            str(numbers[i]),
            fmt(spread.means[i]),
            fmt(spread.deviations[i]),
            Text(clip(questions[i], 70)),
        )
    console.print(table)
    console.print(
        Text(
            f"mean standard deviation over {spread.repeats} repeats: {fmt(spread.mean_deviation)}",
            style="bold",
        )
    )
