"""``ragas-relevancy compare``: stock RAGAS and ours on the same judge replies, side by side,
and stock's requests and tokens against ours in a probe mode (``--ours``), as reported."""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from ..scoring.redaction import redact
from ..scoring.report import clip, fmt, neutralise_controls
from ..scoring.usage import Prices, Usage
from .datafile import InputRow, read_file
from .errors import EXIT_FAILED, exit_code
from .options import FileArg, MapOpt, ProbePrompt, with_settings
from .output.console import (
    make_console,
    print_bad_rows,
    print_cost,
    print_header,
    print_lines,
    right,
    run_fields,
    simple_table,
)
from .setup import DEFAULT_SETTINGS, Scorer, Settings, prepare

__all__ = ["RowParity", "compare", "compare_rows", "compare_table", "cost_table"]

DEFAULT_OURS = ProbePrompt("diverse")  # the default probe mode


@with_settings(fixed={"probe_prompt": "stock"})
def compare(
    file: FileArg,
    map_: MapOpt = None,
    settings: Settings = DEFAULT_SETTINGS,
    tol: Annotated[
        float,
        typer.Option(
            min=0.0, metavar="X", help="Largest |stock - ours| that still counts as equal."
        ),
    ] = 1e-9,
    ours: Annotated[
        ProbePrompt,
        typer.Option(
            metavar="MODE",
            help="Probe mode whose scores are shown next to stock's and whose requests and "
            "tokens are set against stock's (ours scores each row again with the real judge).",
        ),
    ] = DEFAULT_OURS,
    prices: Prices | None = None,
) -> int:
    """Stock RAGAS and ours on the same replies; what each costs.

    Stock AnswerRelevancy and ours in stock mode side by side (the parity check), and the
    score ours gives in --ours mode (diverse, the default); then stock's requests and tokens
    against ours in --ours mode, row by row and in total. Exits 1 when any score differs by
    more than --tol or the prompts differ; otherwise as score does.
    """
    mode = ours.value
    data = read_file(file, map_)
    console = make_console()
    scorer = prepare(settings)
    print_header(console, run_fields(data, scorer, tolerance=f"{tol:g}"))
    results = asyncio.run(compare_rows(scorer, data.rows, mode))
    console.print(compare_table(results, mode))
    failing = [c for c in results if c.differs(tol)]
    stock_failed = [c for c in results if c.stock is None and c.error is None]
    judge_failed = [c for c in results if c.error is not None]
    gaps = [abs(c.stock - c.ours) for c in results if c.stock is not None and c.error is None]
    largest = max((g for g in gaps if math.isfinite(g)), default=0.0)
    line = f"{len(results)} row(s): largest |difference| {largest:.2e}, {len(failing)} beyond "
    line += f"tolerance {tol:g}, stock failed on {len(stock_failed)}"
    line += f", the judge failed on {len(judge_failed)}" if judge_failed else ""
    print_lines(console, line, style="red" if failing else "green")
    _print_cost(console, results, mode, settings.strictness, prices or Prices())
    if scorer.cache_line():
        console.print(scorer.cache_line())
    print_bad_rows(make_console(stderr=True), data.describe_bad(limit=20), len(data.bad))
    if failing:
        return EXIT_FAILED
    scored = sum(1 for c in results if c.error is None and math.isfinite(c.ours))
    return exit_code(scored, len(data.rows) + len(data.bad))


@dataclass
class RowParity:
    """One row compared: stock's score (None when stock failed), ours, and any error."""

    row: InputRow
    stock: float | None
    ours: float
    same_prompts: bool
    stock_error: str | None = None
    error: str | None = None
    stock_usage: Usage | None = None
    ours_usage: Usage | None = None  # ours in the --ours mode, scored anew
    mode_score: float | None = None  # the score ours gives in the --ours mode

    def differs(self, tol: float) -> bool:
        """True when this row breaks parity: a gap beyond ``tol``, other prompts, or no result."""
        if self.error is not None or not self.same_prompts:
            return True
        if self.stock is None:
            return False  # stock failed where ours did not: listed, not a parity gap
        gap = abs(self.stock - self.ours)
        return not (gap <= tol) and not (math.isnan(self.stock) and math.isnan(self.ours))


async def compare_rows(scorer: Scorer, rows: list[InputRow], cost_mode: str) -> list[RowParity]:
    """:func:`compare_with_stock` on each row (ours in ``cost_mode`` too, for its score and
    usage), a few rows at a time, within ``--concurrency`` and the keys' limits."""
    from ..errors import cause_of, failure_text
    from ..parity import compare_with_stock
    from ..run.limits import run_limits
    from ..run.scheduler import Scheduler
    from ..run.streaming import bounded_map

    settings = scorer.settings
    judge, embeddings = scorer.judge_for_runs(), scorer.embeddings.value
    limits = run_limits(settings.rate_limits(), judge, embeddings)
    run = Scheduler(settings.concurrency, limits=limits)
    check = functools.partial(
        compare_with_stock, judge, embeddings, cost_mode=cost_mode, scheduler=run
    )

    async def one(_: int, row: InputRow) -> RowParity:
        try:
            result = await check(row.user_input, row.response, settings.strictness)
        except Exception as exc:  # one row failing is reported with the others
            error = redact(f"{cause_of(exc)}: {failure_text(exc)}".splitlines()[0])
            return RowParity(row, None, math.nan, False, error=error)
        stock_error = redact(result.stock_error) if result.stock_error else None
        cost = result.cost_report
        return RowParity(
            row,
            result.stock_score,
            result.ours_score,
            result.same_prompts,
            stock_error,
            stock_usage=result.stock_usage,
            ours_usage=cost.usage if cost is not None else None,
            mode_score=cost.score if cost is not None else None,
        )

    window = max(1, settings.concurrency // settings.strictness)
    async with run:
        done = dict([pair async for pair in bounded_map(rows, one, window, run)])
    return [done[index] for index in range(len(rows))]


def _print_cost(
    console: Console, results: list[RowParity], mode: str, strictness: int, prices: Prices
) -> None:
    """Stock's requests and tokens against ours, row by row and in total, and in USD."""
    from .stats import summarise_cost

    rows = [(c.row.number, c.stock_usage, c.ours_usage) for c in results if c.error is None]
    what = f"what each costs, strictness {strictness}: stock against ours ({mode})"
    print_lines(console, what, style="bold")
    console.print(cost_table(rows, mode))
    for name, usages in (("stock", [r[1] for r in rows]), (f"ours ({mode})", [r[2] for r in rows])):
        print_cost(console, summarise_cost(usages, prices), prefix=f"{name} ")


def compare_table(results: Sequence[RowParity], mode: str) -> Table:
    """Stock, ours in stock mode, their gap, whether the prompts were the same, ours in ``mode``."""
    table = simple_table(
        *right("row", style="dim"),
        *right("stock", "ours in\nstock mode", "|stock\n- ours|"),
        Column("same\nprompts", justify="center"),
        *right(f"ours in\n{mode}"),
        "question",
    )
    for c in results:
        error = c.error or c.stock_error
        gap = None if c.stock is None else abs(c.stock - c.ours)
        cells: list[str | Text] = [
            str(c.row.number),
            fmt(c.stock) if error is None else Text("failed", style="red"),
            fmt(c.ours),
            "-" if gap is None else Text(f"{gap:.2e}", style="green" if gap <= 1e-9 else "red"),
            "yes" if c.same_prompts else Text("no", style="red"),
            "-" if c.mode_score is None else fmt(c.mode_score),
        ]
        suffix = f"  (stock: {neutralise_controls(error, True)})" if error else ""
        table.add_row(*cells, Text(clip(c.row.user_input, 60) + suffix))
    return table


# Headers on two lines, so 80 columns hold them whole
_COST_HEADERS = ("judge\nreq", "prompt\ntok", "compl.\ntok", "emb\nreq", "emb\ntok")
_RATIO_HEADERS = ("prompt\n×stock", "tokens\n×stock")


def cost_table(rows: Sequence[tuple[int, Usage | None, Usage | None]], mode: str) -> Table:
    """A stock line and a ``mode`` line per (row, stock's usage, ours'): requests, tokens, ours'
    over stock's; then the totals; "n/r" where the provider reported no tokens (never 0)."""
    table = simple_table(
        *right("row", style="dim"), "probes", *right(*_COST_HEADERS, *_RATIO_HEADERS)
    )

    def add(label: str, stock: Usage | None, ours: Usage | None, style: str = "") -> None:
        table.add_row(label, "stock", *_usage_cells(stock), "", "", style=style)
        table.add_row(label, mode, *_usage_cells(ours), *_ratios(stock, ours), style=style)

    for number, stock, ours in rows:
        add(str(number), stock, ours)
    if rows:
        table.add_section()
        add("all", Usage.total(r[1] for r in rows), Usage.total(r[2] for r in rows), "bold")
    return table


def _usage_cells(usage: Usage | None) -> list[str]:
    if usage is None:
        return ["-"] * 5
    counts = (
        usage.judge_requests,
        usage.judge_prompt_tokens,
        usage.judge_completion_tokens,
        usage.embedding_requests,
        usage.embedding_tokens,
    )
    return ["n/r" if count is None else f"{count:,}" for count in counts]


def _ratios(stock: Usage | None, ours: Usage | None) -> list[str]:
    """Ours' judge prompt tokens, then all judge tokens, over stock's ("-": not known)."""
    if stock is None or ours is None:
        return ["-", "-"]
    pairs = [
        (ours.judge_prompt_tokens, stock.judge_prompt_tokens),
        (ours.judge_tokens, stock.judge_tokens),
    ]
    return ["-" if not theirs or mine is None else f"{mine / theirs:.2f}" for mine, theirs in pairs]
