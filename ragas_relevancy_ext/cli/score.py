"""``ragas-relevancy score``: score rows as a stream, save each at once, resume, summarise;
everything is checked before RAGAS loads; the first Ctrl-C lets the rows in flight finish."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from ..run.streaming import EarlyStop
from ..scoring.report import SKIPPED, RelevancyReport, not_scored_cause
from ..scoring.usage import Prices
from ..store.sqlite import SqliteStore
from .datafile import BadRow, Entry, InputRow, Source, parse_map, row_key
from .errors import EXIT_STOPPED, UsageError, exit_code
from .options import (
    TABLE_ROWS,
    ClusterOpt,
    FileArg,
    Interval,
    IntervalOpt,
    MapOpt,
    TableOpt,
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
from .setup import DEFAULT_SETTINGS, Settings, check_settings, prepare, stream_rows, unscored

if TYPE_CHECKING:
    from ..metric import AnswerRelevancy

__all__ = ["INTERRUPTED", "STOP_GRACE", "is_skipped", "score"]

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
    if engine is not EngineChoice.local or ray_address or actors:
        if table:  # the Ray engine prints the summary, never the per-row table
            raise UsageError("--table needs --engine local (show prints a saved report's table)")
        if cluster or interval is not Interval.clt:
            raise UsageError("--cluster and --interval need --engine local (or show the report)")
        if engine is EngineChoice.local:
            given = [n for n, v in (("--ray-address", ray_address), ("--actors", actors)) if v]
            raise UsageError(f"{' and '.join(given)} go(es) with --engine ray")
        if out is None:
            raise UsageError(
                "--engine ray writes to --out: a .jsonl file or a folder for Parquet parts"
            )
        if outputs:
            names = ", ".join(f"--{name}" for name in outputs)
            raise UsageError(f"{names} is not available with --engine ray; read --out instead")
        mapping = parse_map(map_ or [])
        ray = {"address": ray_address, "actors": actors, "out": out, "progress": progress}
        return run_ray_score(file, mapping, settings, **ray, prices=prices)
    source = Source(file, parse_map(map_ or []))
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
        # a cache or journal that cannot be used: said before RAGAS loads. The journal, beside
        # the report and under its lock, holds every judge reply before it is used
        store = None if settings.cache is None else SqliteStore(settings.cache)
        name = f"{report.path.name}.replies.sqlite3"
        journal = None if out is None else SqliteStore(report.path.parent, name, "--out")
        tag = checked.settings_tag
        run = _Run(source, report, tag, settings, out, outputs, probes, table, prices)
        for entry in source.entries():
            run.count(entry)
        other_settings = sum(1 for key in report.index if key not in run.keys)
        if cluster and (lacking := [e for e in source.entries() if _lacks(e, cluster)]):
            rows = ", ".join(str(e.number) for e in lacking[:5]) + ", ..." * (len(lacking) > 5)
            raise UsageError(
                f"--cluster {cluster}: {len(lacking)} row(s) of {source.path} have no value in "
                f"that column (rows {rows}); every row needs one"
            )
        extra: dict[str, str] = {}
        if out is not None:
            again = f", {run.retried} of them failed before" if run.retried else ""
            extra["output"] = (
                f"{out} ({run.resumed} row(s) already there, {run.todo} to score{again})"
            )
        run.fields = run_fields(run.scan, checked, **extra)
        print_header(run.console, run.fields)
        err = make_console(stderr=True)
        print_warnings(err, run.scan.warnings)
        if other_settings:
            err.print(
                f"warning: {other_settings} line(s) in {out} match no row of this input "
                "with these settings (another judge, embeddings, strictness or probe prompt, "
                "or rows edited since); they are replaced when this run completes",
                soft_wrap=True,
            )

        report.begin()
        run.labels = (checked.judge_label, checked.embeddings_label)
        run.scored_with = checked.scored_with
        cache_line = None
        if run.todo:
            try:
                with status_line("loading RAGAS…", progress) as say:
                    scorer = prepare(settings, store, say, journal)
            except KeyboardInterrupt:  # Ctrl-C before scoring began
                run.say_saved()
                return INTERRUPTED
            if scorer.embeddings_label != checked.embeddings_label:
                err.print(f"embeddings: {scorer.embeddings_label}")
            run.labels = (scorer.judge_label, scorer.embeddings_label)
            metric = scorer.metric()
            with progress_bar(run.todo, "scoring", progress) as tick:
                stopped = asyncio.run(run.score(metric, tick))
            cache_line = scorer.cache_line()
            if stopped:
                run.say_saved()
                return INTERRUPTED
            if run.early.stopped:
                run.show(cache_line)
                then = "run the same command to resume" if out is not None else "run it again"
                err.print(f"stopped early: {run.early.why()}; fix it and {then}", soft_wrap=True)
                run.say_saved()
                return EXIT_STOPPED
        else:
            for _ in run.rows():  # nothing to score: this writes the skipped rows
                pass

        if not report.in_order((run.key(e), e.number) for e in source.entries()):
            report.compact((run.key(e), e.number, e.line) for e in source.entries())
        code = run.show(cache_line, bars=(cluster, interval))
        if journal is not None and all(s.status != "failed" for s in report.index.values()):
            journal.remove()  # no row left to ask again
        return code


@dataclass
class _Run:
    """One run of ``score``: what it has to do (counted before anything loads), the rows fed to
    the metric and written as each finishes, Ctrl-C and early stops, what is shown at the end."""

    source: Source
    report: ReportFile
    tag: str
    settings: Settings
    out: Path | None
    outputs: dict[str, Path]
    probes: bool
    table: bool | None
    prices: Prices | None
    fields: dict[str, str] = field(default_factory=dict)
    labels: tuple[str, str] = ("", "")
    scored_with: dict[str, Any] = field(default_factory=dict)  # written on every line
    total: int = 0
    resumed: int = 0
    todo: int = 0
    retried: int = 0
    # key -> rows of the input with it (negative once the run has started scoring it)
    keys: dict[str, int] = field(default_factory=dict)
    stopping: bool = False
    interrupts: int = 0
    early: EarlyStop = field(default_factory=EarlyStop)
    console: Console = field(default_factory=make_console)

    def __post_init__(self) -> None:
        self.scan = self.source.scan()

    def key(self, entry: Entry) -> str:
        problem = None if isinstance(entry, InputRow) else entry.problem
        return row_key(entry.user_input, entry.response, self.tag, problem)

    def count(self, entry: Entry) -> None:
        self.total += 1
        key = self.key(entry)
        if key in self.keys:  # the same row again: scored once, written for each at the end
            self.keys[key] += 1
            return
        self.keys[key] = 1
        status = self.report.status(key)
        if status in ("scored", "skipped"):
            self.resumed += 1
        elif isinstance(entry, InputRow):  # a skipped row is written at once, not scored
            self.todo += 1
            self.retried += status == "failed"

    def say_saved(self) -> None:
        status = self.report.status
        saved = sum(abs(n) for key, n in self.keys.items() if status(key) is not None)
        said = f"{saved} of {self.total} rows saved; run the same command to resume"
        if self.out is None:
            said = f"stopped after {saved} of {self.total} rows; "
            said += "give --out FILE to keep rows and resume"
        print(said, file=sys.stderr, flush=True)

    @property
    def grace(self) -> float:
        return self.settings.timeout or STOP_GRACE

    def _line(self, entry: Entry, key: str, report: RelevancyReport, **options: Any) -> str:
        options.update(line=entry.line, settings=self.scored_with)
        return report_line(entry.number, key, report, *self.labels, entry.extra, **options)

    def rows(self) -> Iterator[InputRow]:
        """Rows still to score, in input order, until Ctrl-C; skipped rows written on the way."""
        keys = self.keys  # a key's count turns negative once its row has started
        for entry in self.source.entries():
            if self.stopping:
                return
            key = self.key(entry)
            status = self.report.status(key)
            if isinstance(entry, BadRow):
                if status is None:
                    error = f"{SKIPPED}{entry.problem} ({entry.where})"
                    report = unscored(self.settings, entry.user_input, entry.response, error)
                    self.report.write(key, self._line(entry, key, report, skipped=entry.problem))
                continue
            count = keys.get(key, 1)
            if status in ("scored", "skipped") or count < 0:
                continue
            keys[key] = -count
            yield entry

    async def score(self, metric: AnswerRelevancy, tick: Callable[[], None]) -> bool:
        """Score every row still to do; True when Ctrl-C stopped the run."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        try:  # Ctrl-C to _interrupt (the main thread only)
            loop.add_signal_handler(signal.SIGINT, lambda: self._interrupt(stop))
            installed = True
        except (ValueError, RuntimeError, NotImplementedError):
            installed = False

        async def consume() -> None:
            async for row, report in stream_rows(metric, self.rows(), stop, self.early):
                key = row_key(row.user_input, row.response, self.tag)
                # In a thread: the line holds the languages (their model loads in seconds once)
                line = await asyncio.to_thread(self._line, row, key, report)
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
        self.say_saved()
        os._exit(INTERRUPTED)

    def show(
        self, cache_line: str | None, bars: tuple[str | None, Interval] = (None, Interval.clt)
    ) -> int:
        """Print the table and summary from the report file, write the end-of-run formats;
        ``bars``: ``--cluster`` and ``--interval``."""
        from .output import FORMATS
        from .saved import extra_of, run_bars
        from .stats import summarise, summarise_cost

        console, report, out = self.console, self.report, self.out

        def items() -> Iterator[tuple[int, RelevancyReport]]:
            for record in report.records():
                yield int(record["row"]), report_from_record(record)

        rows = self.scan.row_count + self.scan.bad_count
        if self.table or (self.table is None and rows <= TABLE_ROWS):
            print_scores(console, items(), probes=self.probes, rows=rows)
        elif self.table is None:
            where = f"every row is in {out}" if out is not None else "give --out to keep every row"
            console.print(
                f"({rows} rows: the per-row table is printed up to {TABLE_ROWS}, or with "
                f"--table; {where})"
            )
        triples = [(n, r.score, "") for n, r in items()]  # questions of the lowest only, below
        causes = {n: not_scored_cause(r) for n, r in items() if not math.isfinite(r.score)}
        summary = summarise(triples, causes=causes)
        lowest = {low.number for low in summary.lowest}
        low_reports = {n: r for n, r in items() if n in lowest}
        summary = replace(
            summary,
            lowest=[
                replace(low, user_input=low_reports[low.number].user_input)
                for low in summary.lowest
            ],
            cost=summarise_cost([r.usage for _, r in items() if not is_skipped(r)], self.prices),
            error_bars=run_bars(
                ((report_from_record(r), extra_of(r)) for r in report.records()), *bars
            ),
        )
        print_summary(console, summary, low_reports)
        print_caution(console, self.fields)
        if cache_line:
            console.print(cache_line)
        if out is not None:
            console.print(f"wrote {report.appended} new line(s) to {out}", soft_wrap=True)
        pairs = list(items()) if self.outputs else []
        for name, path in self.outputs.items():
            FORMATS[name].writer()(path, pairs, summary, self.fields)
            console.print(f"wrote {path}", soft_wrap=True)
        err = make_console(stderr=True)
        print_bad_rows(err, self.scan.describe_bad(limit=20), self.scan.bad_count)
        print_causes(err, items())
        if triples and summary.scored == 0:
            err.print("no sample could be scored")
        return exit_code(summary.scored, rows)


def _lacks(entry: Entry, column: str) -> bool:
    """Whether a row to score (not one set aside) has no value in ``column``."""
    return isinstance(entry, InputRow) and entry.extra.get(column) is None


def is_skipped(report: RelevancyReport) -> bool:
    """Whether ``report`` is of a row set aside unscored (no request was made for it)."""
    return bool(report.error) and str(report.error).startswith(SKIPPED)
