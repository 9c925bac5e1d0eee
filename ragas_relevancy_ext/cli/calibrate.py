"""``ragas-relevancy calibrate``: how well scores agree with human ratings, and how stable they
are (``--repeats K``: each sample scored K times without the cache, its mean correlated)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from .datafile import InputRow, read_file
from .errors import exit_code
from .options import FileArg, MapOpt, with_settings
from .output.console import (
    is_offline,
    make_console,
    print_agreement,
    print_bad_rows,
    print_header,
    print_lines,
    print_spread,
    run_fields,
)
from .setup import DEFAULT_SETTINGS, Settings, prepare, stream_rows

if TYPE_CHECKING:
    from ..metric import AnswerRelevancy

__all__ = ["calibrate", "default_good_from", "print_threshold"]

FEW_PAIRS = 20


@with_settings()
def calibrate(
    file: FileArg,
    ratings: Annotated[
        str,
        typer.Option(
            metavar="COLUMN", help="Column with human relevance ratings (any numeric scale)."
        ),
    ],
    map_: MapOpt = None,
    settings: Settings = DEFAULT_SETTINGS,
    repeats: Annotated[
        int,
        typer.Option(
            min=1, metavar="K", help="Score each sample K times (cache off) and report the spread."
        ),
    ] = 1,
    resamples: Annotated[
        int, typer.Option(min=100, metavar="N", help="Bootstrap resamples.")
    ] = 2000,
    seed: Annotated[int, typer.Option(metavar="N", help="Bootstrap seed.")] = 20240611,
    good_from: Annotated[
        float | None,
        typer.Option(
            metavar="R",
            help="Ratings of R and above are good, the rest bad, for the threshold (default: "
            "the lowest rating above the middle of the ratings seen).",
        ),
    ] = None,
) -> int:
    """Agreement of scores with human ratings, and a threshold.

    Pearson and Spearman correlation with 95% bootstrap intervals; the score that best
    separates good from bad ratings (Youden's J), with its interval. Exit codes as score's.
    """
    from .stats import agreement, repeat_spread

    data = read_file(file, map_, numeric=ratings)
    console = make_console()
    extra = {"ratings": f"column {ratings!r}"}
    if repeats > 1:  # repeats measure the judge's own spread: never from the cache
        ignored = " (--cache ignored)" if settings.cache is not None else ""
        extra["repeats"] = f"{repeats} per sample, judge cache off{ignored}"
        settings = replace(settings, cache=None)
    scorer = prepare(settings)
    print_header(console, run_fields(data, scorer, **extra))

    runs = [asyncio.run(_scores(scorer.metric(), data.rows)) for _ in range(repeats)]
    spread = repeat_spread([list(values) for values in zip(*runs, strict=True)])
    scores = spread.means if repeats > 1 else runs[0]
    human = [float(row.extra[ratings]) for row in data.rows]

    result = agreement(scores, human, resamples=resamples, seed=seed)
    print_agreement(console, result, ratings)
    if result.n < FEW_PAIRS:
        wide = f"only {result.n} pairs: under {FEW_PAIRS}, the interval is wide"
        print_lines(console, wide, style="yellow")
    print_threshold(console, scores, human, ratings, good_from, resamples, seed)
    if repeats > 1:
        numbers, questions = [r.number for r in data.rows], [r.user_input for r in data.rows]
        print_spread(console, numbers, questions, spread, deterministic=is_offline(scorer))
    if scorer.cache_line():
        console.print(scorer.cache_line())
    print_bad_rows(make_console(stderr=True), data.describe_bad(limit=20), len(data.bad))
    return exit_code(result.n, len(data.rows) + len(data.bad))


async def _scores(metric: AnswerRelevancy, rows: Sequence[InputRow]) -> list[float]:
    """Each row's score, in row order (they finish in any order)."""
    scores = {row.number: report.score async for row, report in stream_rows(metric, rows)}
    return [scores[row.number] for row in rows]


def default_good_from(ratings: Sequence[float]) -> float | None:
    """The lowest rating above the middle of the range seen (4 on 1-5); None if all the same."""
    low, high = min(ratings), max(ratings)
    above = [r for r in ratings if r > (low + high) / 2]
    return min(above) if low < high and above else None


def print_threshold(
    console: Console,
    scores: Sequence[float],
    ratings: Sequence[float],
    column: str,
    good_from: float | None,
    resamples: int,
    seed: int,
) -> None:
    """How the ratings were split, then the score that best separates good from bad ratings,
    with its bootstrap interval and the share of each group at or above it."""
    from ..error_bars import best_threshold, interval_text
    from ..scoring.report import fmt

    split = good_from if good_from is not None else default_good_from(ratings)
    if split is None:
        print_lines(console, f"every {column} rating is the same: no threshold to pick")
        return
    how = "--good-from" if good_from is not None else "default; --good-from R sets it"
    cut = best_threshold(scores, [r >= split for r in ratings], resamples=resamples, seed=seed)
    groups = f"good: {column} >= {split:g} ({cut.n_good} row(s)), bad: below {split:g}"
    print_lines(console, f"{groups} ({cut.n_bad}) [{how}]")
    if not (cut.n_good and cut.n_bad):
        print_lines(console, "one group is empty: no threshold to pick", style="yellow")
        return
    interval = f"95% interval {interval_text(cut.ci_low, cut.ci_high, 3)}"
    print_lines(
        console,
        f"threshold {fmt(cut.threshold, 3)} ({interval}, bootstrap, {cut.resamples} resamples) "
        f"separates them best: {cut.good_above:.0%} of good and {cut.bad_above:.0%} of bad rows "
        "score at or above it",
        style="bold",
    )
