"""``ragas-relevancy score``: score rows as a stream, save each at once, resume, summarise.

Everything is checked before RAGAS loads; the first Ctrl-C lets the rows in flight finish, the
second quits. A finished run rewrites the report in input order, one line per input row.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

import typer

from ..run.streaming import EarlyStop
from ..scoring.report import SKIPPED, RelevancyReport, not_scored_cause
from ..scoring.usage import Prices
from ..store.sqlite import SqliteStore
from .datafile import BadRow, Entry, Row, Scan, Source, parse_map, row_key
from .errors import EXIT_STOPPED, UsageError, exit_code
from .options import (
    TABLE_ROWS,
    ClusterOpt,
    FileArg,
    Interval,
    IntervalOpt,
    MapOpt,
    TableOpt,
    freeze_heap_for_this_process,
    with_settings,
)
from .output import check_outputs
from .output.console import (
    make_console,
    print_bad_rows,
    print_causes,
    print_caution,
    print_header,
    print_scores,
    print_summary,
    print_warnings,
    progress_bar,
    run_fields,
    status_line,
)
from .output.jsonl import ReportFile, report_from_record, report_line
from .ray_score import ActorsOpt, EngineChoice, EngineOpt, RayAddressOpt, run_ray_score
from .setup import DEFAULT_SETTINGS, Settings, check_settings, prepare, stream_rows

__all__ = [
    "INTERRUPTED",
    "STOP_GRACE",
    "TABLE_ROWS",
    "is_skipped",
    "run_score",
    "score",
]

INTERRUPTED = 130  # the shell's code for a run stopped by Ctrl-C
STOP_GRACE = 30.0  # seconds rows in flight get after Ctrl-C when --timeout is not set


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
    prices: Prices | None = None,
    probes: Annotated[bool, typer.Option(help="Show each sample's probes.")] = True,
    table: TableOpt = None,
    progress: Annotated[bool, typer.Option(help="Progress bar on stderr (terminals).")] = True,
    engine: EngineOpt = EngineChoice.local,
    ray_address: RayAddressOpt = None,
    actors: ActorsOpt = None,
    cluster: ClusterOpt = None,
    interval: IntervalOpt = Interval.clt,
) -> int:
    """Score every row; show each probe, a summary and the lowest.

    Exit codes: 0 every row scored, 1 none, 2 bad input or settings, 3 some rows skipped or NaN,
    4 stopped early: rows failed one after another for a cause no retry mends (bad key, unknown
    model, server not reached), 130 stopped by Ctrl-C (what finished is saved).
    """
    shared: dict[str, Any] = dict(out=out, outputs=outputs, progress=progress, prices=prices)
    if engine is not EngineChoice.local or ray_address or actors:
        if table:  # the Ray engine prints the summary, never the per-row table
            raise UsageError("--table needs --engine local (show prints a saved report's table)")
        if cluster or interval is not Interval.clt:
            raise UsageError("--cluster and --interval need --engine local (or show the report)")
        engine_options = {"engine": engine, "address": ray_address, "actors": actors}
        return run_ray_score(file, map_, settings, **engine_options, **shared)
    source = Source(file, parse_map(map_ or []))
    view = {"probes": probes, "table": table, "cluster": cluster, "interval": interval}
    return run_score(source, settings, **view, **shared)


@dataclass
class _Work:
    """What a run has to do, counted in one pass over the input before anything loads."""

    out: Path | None
    total: int = 0
    resumed: int = 0
    todo: int = 0
    retried: int = 0
    # key -> rows of the input with it (negative once the run has started scoring it)
    keys: dict[str, int] = field(default_factory=dict)

    def count(self, report: ReportFile, entry: Entry, key: str) -> None:
        self.total += 1
        if key in self.keys:  # the same row again: scored once, written for each at the end
            self.keys[key] += 1
            return
        self.keys[key] = 1
        status = report.status(key)
        if status in ("scored", "skipped"):
            self.resumed += 1
        elif isinstance(entry, Row):  # a skipped row is written at once, not scored
            self.todo += 1
            self.retried += status == "failed"

    def say_saved(self, report: ReportFile) -> None:
        saved = sum(abs(n) for key, n in self.keys.items() if report.status(key) is not None)
        if self.out is None:
            said = (
                f"stopped after {saved} of {self.total} rows; "
                "give --out FILE to keep rows and resume"
            )
        else:
            said = f"{saved} of {self.total} rows saved; run the same command to resume"
        print(said, file=sys.stderr, flush=True)


def run_score(
    source: Source,
    settings: Settings,
    *,
    out: Path | None = None,
    outputs: dict[str, Path] | None = None,
    probes: bool = True,
    progress: bool = True,
    prices: Prices | None = None,
    table: bool | None = None,
    cluster: str | None = None,
    interval: Interval = Interval.clt,
) -> int:
    """Score ``source``'s rows into ``out`` and print the results; the exit code as
    :func:`.errors.exit_code`, or 130 when Ctrl-C stopped the run. ``table``: print the
    per-row table (True), not (False), or up to :data:`TABLE_ROWS` rows (None)."""
    console = make_console()
    checked = check_settings(settings)  # bad specs and missing keys: before anything else
    # each output its own file, and only ever one of ours replaced: before anything is read
    outputs = check_outputs(outputs or {}, input_path=source.path, out=out)
    with contextlib.ExitStack() as stack:
        if out is None:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="ragas-relevancy-"))
            report = ReportFile(Path(folder) / "report.jsonl")
        else:
            report = ReportFile(out, input_path=source.path)  # refuses a file not ours
            report.lock()
        stack.callback(report.close)

        # a cache that cannot be used: said before RAGAS loads
        store = None if settings.cache is None else SqliteStore(settings.cache)
        work = _Work(out)
        scan = source.scan()
        tag = checked.settings_tag
        for entry in source.entries():
            work.count(report, entry, _key(entry, tag))
        other_settings = sum(1 for key in report.index if key not in work.keys)
        if cluster and not any(cluster in e.extra for e in source.entries() if isinstance(e, Row)):
            raise UsageError(f"--cluster {cluster}: no row of {source.path} has that column")
        extra: dict[str, str] = {}
        if out is not None:
            again = f", {work.retried} of them failed before" if work.retried else ""
            extra["output"] = (
                f"{out} ({work.resumed} row(s) already there, {work.todo} to score{again})"
            )
        fields = run_fields(scan, checked, **extra)
        print_header(console, fields)
        err = make_console(stderr=True)
        print_warnings(err, scan.warnings)
        if other_settings:
            err.print(
                f"warning: {other_settings} line(s) in {out} match no row of this input "
                "with these settings (another judge, embeddings, strictness or probe prompt, "
                "or rows edited since); they are replaced when this run completes",
                soft_wrap=True,
            )

        report.begin()
        show = functools.partial(
            _show, console, report, scan, fields, outputs, probes, out, prices=prices, table=table
        )
        labels = (checked.judge_label, checked.embeddings_label)
        runner = _Runner(source, report, tag, labels, work, settings)
        cache_line = None
        if work.todo:
            try:
                with status_line("loading RAGAS…", progress) as say:
                    scorer = prepare(settings, store, say)
            except KeyboardInterrupt:  # Ctrl-C before scoring began
                work.say_saved(report)
                return INTERRUPTED
            if scorer.embeddings_label != checked.embeddings_label:
                err.print(f"embeddings: {scorer.embeddings_label}")
            runner.labels = (scorer.judge_label, scorer.embeddings_label)
            metric = scorer.metric()
            freeze_heap_for_this_process()
            with progress_bar(work.todo, "scoring", progress) as tick:
                stopped = runner.run(metric, tick)
            cache_line = scorer.cache_line()
            if stopped:
                work.say_saved(report)
                return INTERRUPTED
            if runner.early.stopped:
                show(cache_line)
                then = "run the same command to resume" if out is not None else "run it again"
                err.print(f"stopped early: {runner.early.why()}; fix it and {then}", soft_wrap=True)
                work.say_saved(report)
                return EXIT_STOPPED
        else:
            for _ in runner.rows():  # nothing to score: this writes the skipped rows
                pass

        if not report.in_order((_key(e, tag), e.number) for e in source.entries()):
            report.compact((_key(e, tag), e.number, e.line) for e in source.entries())
        return show(cache_line, bars=(cluster, interval))


def _key(entry: Entry, tag: str) -> str:
    problem = None if isinstance(entry, Row) else entry.problem
    return row_key(entry.user_input, entry.response, tag, problem)


@dataclass
class _Runner:
    """Feeds rows to the metric, writes each as it finishes, and handles Ctrl-C and early stops."""

    source: Source
    report: ReportFile
    tag: str
    labels: tuple[str, str]
    work: _Work
    settings: Settings
    stopping: bool = False
    interrupts: int = 0
    early: EarlyStop = field(default_factory=EarlyStop)

    @property
    def grace(self) -> float:
        """Seconds the rows in flight get after Ctrl-C."""
        return self.settings.timeout or STOP_GRACE

    def run(self, metric: Any, tick: Callable[[], None]) -> bool:
        """Score every row still to do; True when Ctrl-C stopped the run."""
        return asyncio.run(self._run(metric, tick))

    def _line(self, entry: Entry, key: str, report: RelevancyReport, **options: Any) -> str:
        return report_line(
            entry.number, key, report, *self.labels, entry.extra, line=entry.line, **options
        )

    def rows(self) -> Iterator[Row]:
        """Rows still to score, in input order, until Ctrl-C; skipped rows written on the way."""
        keys = self.work.keys  # a key's count turns negative once its row has started
        for entry in self.source.entries():
            if self.stopping:
                return
            key = _key(entry, self.tag)
            status = self.report.status(key)
            if isinstance(entry, BadRow):
                if status is None:
                    error = f"{SKIPPED}{entry.problem} ({entry.where})"
                    report = RelevancyReport(
                        user_input=entry.user_input,
                        response=entry.response,
                        score=float("nan"),
                        strictness=self.settings.strictness,
                        probe_prompt=self.settings.probe_prompt,
                        all_noncommittal=False,
                        error=error,
                    )
                    self.report.write(key, self._line(entry, key, report, skipped=entry.problem))
                continue
            count = keys.get(key, 1)
            if status in ("scored", "skipped") or count < 0:
                continue
            keys[key] = -count
            yield entry

    async def _run(self, metric: Any, tick: Callable[[], None]) -> bool:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        try:  # Ctrl-C to _interrupt (the main thread only)
            loop.add_signal_handler(signal.SIGINT, lambda: self._interrupt(stop))
            installed = True
        except (ValueError, RuntimeError, NotImplementedError):
            installed = False

        async def consume() -> None:
            async for scored in stream_rows(metric, self.rows(), stop, self.early):
                row = scored.row
                key = row_key(row.user_input, row.response, self.tag)
                # In a thread: the line holds the languages (their model loads in seconds once)
                line = await asyncio.to_thread(self._line, row, key, scored.report)
                self.report.write(key, line)
                tick()

        task = asyncio.ensure_future(consume())
        waiter = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(task, self.grace)
            else:
                task.result()
        finally:
            waiter.cancel()
            if installed:
                loop.remove_signal_handler(signal.SIGINT)
        return self.stopping

    def _interrupt(self, stop: asyncio.Event) -> None:
        self.interrupts += 1
        if self.interrupts == 1:
            self.stopping = True
            stop.set()
            make_console(stderr=True).print(
                f"stopping: rows in flight get up to {self.grace:g} s to finish "
                "(Ctrl-C again to quit now)",
                soft_wrap=True,
            )
            return
        self.report.close()
        self.work.say_saved(self.report)
        os._exit(INTERRUPTED)


def _show(
    console: Any,
    report: ReportFile,
    scan: Scan,
    fields: dict[str, str],
    outputs: dict[str, Path] | None,
    probes: bool,
    out: Path | None,
    cache_line: str | None,
    prices: Prices | None = None,
    table: bool | None = None,
    bars: tuple[str | None, Interval] = (None, Interval.clt),
) -> int:
    """Print the table and summary from the report file, and write the end-of-run formats;
    ``bars``: the ``--cluster`` column and ``--interval`` of the mean's interval."""
    from .output import FORMATS
    from .saved import extra_of, run_bars
    from .stats import summarise, summarise_cost

    def items() -> Iterator[tuple[int, RelevancyReport]]:
        for record in report.records():
            yield int(record["row"]), report_from_record(record)

    rows = scan.row_count + scan.bad_count
    if table or (table is None and rows <= TABLE_ROWS):
        print_scores(console, items(), probes=probes, rows=rows)
    elif table is None:
        where = f"every row is in {out}" if out is not None else "give --out to keep every row"
        console.print(
            f"({rows} rows: the per-row table is printed up to {TABLE_ROWS}, or with --table; "
            f"{where})"
        )
    triples = [(n, r.score, "") for n, r in items()]  # questions of the lowest only, below
    causes = {n: not_scored_cause(r) for n, r in items() if not math.isfinite(r.score)}
    summary = summarise(triples, causes=causes)
    lowest = {low.number for low in summary.lowest}
    low_reports = {n: r for n, r in items() if n in lowest}
    summary = replace(
        summary,
        lowest=[
            replace(low, user_input=low_reports[low.number].user_input) for low in summary.lowest
        ],
        cost=summarise_cost([r.usage for _, r in items() if not is_skipped(r)], prices),
        error_bars=run_bars(
            ((report_from_record(r), extra_of(r)) for r in report.records()), *bars
        ),
    )
    print_summary(console, summary, low_reports)
    print_caution(console, fields)
    if cache_line:
        console.print(cache_line)
    if out is not None:
        console.print(f"wrote {report.appended} new line(s) to {out}", soft_wrap=True)
    pairs = list(items()) if outputs else []
    for name, path in (outputs or {}).items():
        FORMATS[name].writer()(path, pairs, summary, fields)
        console.print(f"wrote {path}", soft_wrap=True)
    err = make_console(stderr=True)
    print_bad_rows(err, scan.describe_bad(limit=20), scan.bad_count)
    print_causes(err, items())
    if triples and summary.scored == 0:
        err.print("no sample could be scored")
    return exit_code(summary.scored, rows)


def is_skipped(report: RelevancyReport) -> bool:
    """Whether ``report`` is a row that was set aside unscored (no request was made for it)."""
    return bool(report.error) and str(report.error).startswith(SKIPPED)
