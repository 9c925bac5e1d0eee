"""``ragas-relevancy score``: score rows, save each as it finishes, resume, show and summarise."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Annotated

import typer

from ..report import not_scored_cause
from .datafile import DataFile, read_file
from .errors import exit_code
from .options import FileArg, MapOpt, with_settings
from .output.console import (
    make_console,
    print_bad_rows,
    print_caution,
    print_header,
    print_summary,
    progress_bar,
    run_fields,
    scores_table,
)
from .output.jsonl import JsonlWriter, read_report_lines, report_from_record
from .ray_score import ActorsOpt, Engine, EngineOpt, RayAddressOpt, run_ray_score
from .setup import DEFAULT_SETTINGS, Scored, Settings, Setup, prepare, score_rows

__all__ = ["run_score", "score"]


@with_settings()
def score(
    file: FileArg,
    map_: MapOpt = None,
    settings: Settings = DEFAULT_SETTINGS,
    out: Annotated[
        Path | None,
        typer.Option(
            metavar="PATH", help="Write one JSON line per sample as it finishes; re-runs resume it."
        ),
    ] = None,
    outputs: dict[str, Path] | None = None,
    probes: Annotated[bool, typer.Option(help="Show each sample's probes.")] = True,
    progress: Annotated[bool, typer.Option(help="Progress bar on stderr (terminals).")] = True,
    engine: EngineOpt = Engine.local,
    ray_address: RayAddressOpt = None,
    actors: ActorsOpt = None,
) -> int:
    """Score every row; show each probe, a summary and the lowest.

    Exit codes: 0 every row scored, 1 none, 2 bad input or settings, 3 some rows skipped or NaN.
    """
    if engine is not Engine.local or ray_address or actors:
        return run_ray_score(
            file,
            map_,
            settings,
            engine=engine,
            address=ray_address,
            actors=actors,
            out=out,
            outputs=outputs,
            progress=progress,
        )
    return run_score(
        read_file(file, map_), settings, out=out, outputs=outputs, probes=probes, progress=progress
    )


def run_score(
    data: DataFile,
    settings: Settings,
    *,
    out: Path | None = None,
    outputs: dict[str, Path] | None = None,
    probes: bool = True,
    progress: bool = True,
) -> int:
    """Score ``data``'s rows and print the results; the exit code as :func:`.errors.exit_code`."""
    from .output import FORMATS
    from .stats import summarise

    console = make_console()
    setup = prepare(settings)

    done = read_report_lines(out) if out is not None else {}
    kept = {k: r for k, r in done.items() if r.get("error") is None}  # failed rows: try again
    resumed = [
        Scored(row, report_from_record(kept[(row.number, row.key)]))
        for row in data.rows
        if (row.number, row.key) in kept
    ]
    todo = [row for row in data.rows if (row.number, row.key) not in kept]
    extra = {}
    if out is not None:
        retried = sum(1 for row in todo if (row.number, row.key) in done)
        again = f", {retried} of them failed before" if retried else ""
        extra["output"] = (
            f"{out} ({len(resumed)} row(s) already there, {len(todo)} to score{again})"
        )
    print_header(console, run_fields(data, setup, **extra))
    _warn_if_settings_differ(resumed, done, setup, out)

    writer = (
        JsonlWriter(out, setup.judge_label, setup.embeddings.label)
        if out is not None
        else contextlib.nullcontext()
    )
    with writer as sink, progress_bar(len(todo), "scoring", progress) as tick:

        def on_done(scored: Scored) -> None:
            if sink is not None:
                sink.write(scored.row.number, scored.row.key, scored.report, scored.row.extra)
            tick()

        fresh = asyncio.run(score_rows(setup.metric(), todo, on_done)) if todo else []

    items = sorted(resumed + fresh, key=lambda s: s.row.number)
    pairs = [(s.row.number, s.report) for s in items]
    console.print(scores_table(pairs, probes=probes))
    causes = {n: not_scored_cause(r) for n, r in pairs}
    summary = summarise([(n, r.score, r.user_input) for n, r in pairs], causes=causes)
    print_summary(console, summary, dict(pairs))
    print_caution(console, run_fields(data, setup))
    if setup.cache_line():
        console.print(setup.cache_line())
    if out is not None:
        console.print(f"wrote {len(fresh)} line(s) to {out}", soft_wrap=True)
    for name, path in (outputs or {}).items():
        FORMATS[name].writer()(path, pairs, summary, run_fields(data, setup, **extra))
        console.print(f"wrote {path}", soft_wrap=True)
    print_bad_rows(make_console(stderr=True), data.describe_bad(limit=20), len(data.bad))
    if pairs and summary.scored == 0:
        first = next(r.reason for _, r in pairs)
        make_console(stderr=True).print(f"no sample could be scored; first: {first}")
    return exit_code(summary.scored, len(data.rows) + len(data.bad))


def _warn_if_settings_differ(
    resumed: list[Scored], done: dict[tuple[int, str], dict], setup: Setup, out: Path | None
) -> None:
    """Say so when rows kept from ``out`` were scored with another judge or embeddings."""
    current = (setup.judge_label, setup.embeddings.label)
    records = [done[(s.row.number, s.row.key)] for s in resumed]
    other = sum(1 for r in records if (r.get("judge"), r.get("embeddings")) != current)
    if other:
        make_console(stderr=True).print(
            f"warning: {other} row(s) kept from {out} were scored with another judge or "
            "embeddings; give --out a new file to score them all alike"
        )
