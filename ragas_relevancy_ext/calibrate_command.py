"""``ragas-relevancy calibrate``: how well scores agree with human ratings, and how stable they are.

With ``--repeats K`` every sample is scored K times without the cache; the correlation then
uses each sample's mean score, and the per-sample spread is printed.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from rich.text import Text

from .calibration import agreement, repeat_spread
from .console import make_console, print_agreement, print_bad_rows, print_header, print_spread
from .console import run_fields as fields_of
from .datafile import DataFile
from .runner import Settings, prepare, score_rows

FEW_PAIRS = 20


def run_calibrate(
    data: DataFile,
    settings: Settings,
    *,
    ratings: str,
    repeats: int = 1,
    resamples: int = 2000,
    seed: int = 20240611,
) -> int:
    """Score, correlate with ``ratings`` and print; the exit code (1 when nothing scored)."""
    console = make_console()
    cache_ignored = repeats > 1 and settings.cache is not None
    if repeats > 1:  # repeats measure the judge's own spread: never from the cache
        settings = replace(settings, cache=None)
    setup = prepare(settings)
    extra = {"ratings": f"column {ratings!r}"}
    if repeats > 1:
        extra["repeats"] = f"{repeats} per sample, judge cache off" + (
            " (--cache ignored)" if cache_ignored else ""
        )
    print_header(console, fields_of(data, setup, **extra))

    runs = []
    for _ in range(repeats):
        scored = asyncio.run(score_rows(setup.metric(), data.rows))
        runs.append([s.report.score for s in scored])
    per_sample = [list(values) for values in zip(*runs, strict=True)]
    spread = repeat_spread(per_sample)
    scores = spread.means if repeats > 1 else runs[0]
    human = [float(row.extra[ratings]) for row in data.rows]

    result = agreement(scores, human, resamples=resamples, seed=seed)
    print_agreement(console, result, ratings)
    if result.n < FEW_PAIRS:
        console.print(
            Text(f"only {result.n} pairs: under {FEW_PAIRS}, the interval is wide", style="yellow")
        )
    if repeats > 1:
        print_spread(
            console, [r.number for r in data.rows], [r.user_input for r in data.rows], spread
        )
    if setup.cache_line():
        console.print(setup.cache_line())
    print_bad_rows(make_console(stderr=True), data.describe_bad(limit=20), len(data.bad))
    return 1 if result.n == 0 else 0
