"""``ragas-relevancy score INPUT --engine ray``: read with Ray Data, score on a pool of actors,
and save each batch to ``--out`` as it arrives (the ``score`` JSONL report, or a folder of
Parquet parts), so a re-run skips the rows saved. Ray is imported only inside the run."""

from __future__ import annotations

import heapq
import json
import logging
import math
import os
import sys
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from enum import Enum
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ..scoring.report import SKIPPED, as_text, clip, fmt
from ..scoring.usage import Prices, Usage
from .errors import UsageError, exit_code
from .options import option
from .output.files import PidLock, same_file, through_link
from .output.jsonl import FORMAT, ReportFile, is_report_record, report_line, take_lock
from .setup import Scorer, Settings, check_settings, prepare, unscored

if TYPE_CHECKING:
    from .stats import CostSummary

__all__ = [
    "ActorsOpt",
    "EngineChoice",
    "EngineOpt",
    "RayAddressOpt",
    "SettingsMetric",
    "run_ray_score",
    "small_job_note",
]

RAY_EXTRA = "pip install 'ragas-relevancy-ext[ray]'"

EngineChoice = Enum("EngineChoice", {"local": "local", "ray": "ray"}, type=str)
EngineChoice.__doc__ = "Where rows are scored."

EngineOpt = option(
    EngineChoice,
    None,
    "local: in this process. ray: on Ray Data actors, for big files or folders of .jsonl, .csv "
    f"or .parquet; writes --out and prints a summary, not every row ({RAY_EXTRA}).",
)
RayAddressOpt = option(
    str | None, "ADDR", "Ray cluster to join (default: start Ray on this machine)."
)
ActorsOpt = option(
    int | None,
    None,
    "Ray actors scoring at once (default 2); each keeps --concurrency calls in flight.",
    min=1,
)

# Input kinds Ray reads, by file suffix.
INPUT_KINDS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet"}
DEFAULT_ACTORS = 2
# batch size = this x --concurrency: an actor holds 8 batches, a few times the rows it has in
# flight, and no more, so the actors that start first do not take most of a small input
ROWS_PER_CALL_IN_FLIGHT = 2
LOWEST_SHOWN = 5


@dataclass(frozen=True)
class SettingsMetric:
    """A picklable metric factory: each Ray actor builds judge, embeddings and metric itself,
    its keys' limits kept by the run's actors together (see :func:`.ray.score_dataset`), not in
    ``--cache``'s file, which is one node's; ``--limits-file`` given is kept."""

    settings: Settings

    def __call__(self) -> Any:
        metric = prepare(self.settings).metric()
        metric.rate_limits = replace(metric.rate_limits, shared=self.settings.limits_file)
        return metric


def run_ray_score(
    file: Path,
    mapping: dict[str, str],
    settings: Settings,
    *,
    address: str | None,
    actors: int | None,
    out: Path,
    progress: bool = True,
    prices: Prices | None = None,
) -> int:
    """Score ``file`` on Ray actors into ``out``; the exit code as :func:`.errors.exit_code`."""
    tag = check_settings(settings).settings_tag  # a bad judge spec or a missing key fails here
    sink = open_output(out, file)  # refuses an output this tool did not write, untouched
    try:
        return _run(sink, file, mapping, settings, tag, address, actors, out, progress, prices)
    finally:
        sink.close()


def _run(
    sink: JsonlOutput | ParquetOutput,
    file: Path,
    mapping: dict[str, str],
    settings: Settings,
    tag: str,
    address: str | None,
    actors: int | None,
    out: Path,
    progress: bool,
    prices: Prices | None,
) -> int:
    from .output.console import make_console, print_header
    from .stats import summarise_cost

    done = sink.done_keys()
    scorer = prepare(settings)

    try:
        import ray

        from ..ray import engine as ray_engine
    except ImportError:
        raise UsageError(f"--engine ray needs Ray: {RAY_EXTRA}") from None
    if settings.cache is not None:  # the actors' working folder may differ from this one
        settings = replace(settings, cache=settings.cache.resolve())
    count = actors or DEFAULT_ACTORS
    batch_size = ROWS_PER_CALL_IN_FLIGHT * settings.concurrency
    note = small_job_note(file, count, batch_size, len(done))
    if note is not None:
        make_console(stderr=True).print(note, soft_wrap=True)
    if not ray.is_initialized():  # Ray's own log lines stay in its log files
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.ERROR,
        )
    # one progress bar on a terminal, none when piped, and no chatter about either
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = progress and sys.stdout.isatty() and sys.stderr.isatty()
    context.enable_operator_progress_bars = False
    context.print_on_execution_start = False
    context.enable_auto_log_stats = False
    ds = read_input(file)
    if mapping:
        ds = ds.rename_columns(mapping)
    names = ds.schema().names
    try:
        ray_engine.check_columns(names, "user_input", "response")
    except ValueError as exc:
        raise UsageError(f"{file}: {exc}; name yours with --map COLUMN=user_input") from None
    taken = [c for c in sink.columns if c in names]
    if taken:
        raise UsageError(
            f"{file}: Parquet parts add column(s) {', '.join(taken)}, which the input has; "
            "rename them with --map or write --out as .jsonl"
        )

    console = make_console()
    print_header(console, header_fields(file, scorer, count, out, len(done)))
    scored = ray_engine.score_dataset(
        ds,
        SettingsMetric(settings),
        concurrency=count,
        batch_size=batch_size,
        settings_tag=tag,
        skip_keys=done,
        otel=settings.otel,  # the traces URL: each actor sends its spans there too
    )
    tally = Tally()
    batches = sink.save(scored.iter_batches(batch_format="pyarrow", batch_size=None), scorer)
    cost = summarise_cost(tally.usages(batches), prices)  # the stream, counted as it passes
    tally.show(console, out, cost)
    # rows already in --out were scored without an error before (or set aside, as score does)
    return exit_code(tally.scored + len(done) - sink.set_aside, tally.rows + len(done))


def header_fields(file: Path, scorer: Scorer, actors: int, out: Path, done: int) -> dict[str, str]:
    """The run's header: what is read, where it is scored, then what ``score`` shows."""
    from .output.console import used_fields

    engine = f"ray, {actors} actor(s) x {scorer.settings.concurrency} call(s) in flight"
    given = scorer.settings.rate_limits()
    if str(given) != "learned":
        engine += f"; together they keep to {given}"  # each key's, kept on a Ray actor
    return used_fields(
        {"input": str(file), "engine": engine},
        scorer,
        output=f"{out} ({done} row(s) already there, skipped)",
    )


def small_job_note(path: Path, actors: int, batch_size: int, done: int) -> str | None:
    """A note when ``path`` has fewer rows to score than ``actors`` batches of ``batch_size``
    (Ray's start-up then costs more than its actors gain), else None."""
    enough = actors * batch_size
    rows = max(0, count_rows(path, enough + done) - done)
    if not 0 < rows < enough:
        return None
    return (
        f"note: {rows} row(s) to score fill fewer than {actors} actor(s) x {batch_size} rows per "
        "batch, so Ray's start-up costs more than its actors gain; --engine local is faster here"
    )


def count_rows(path: Path, limit: int) -> int:
    """The data rows in ``path`` (a file or a folder of .jsonl, .csv or .parquet), counted up to
    ``limit`` (Parquet from its footers)."""
    import csv

    rows = 0
    for file in _data_files(path):
        kind = INPUT_KINDS.get(file.suffix.lower())
        if rows >= limit or kind is None:
            continue
        if kind == "parquet":
            import pyarrow.parquet as pq

            rows += pq.ParquetFile(file).metadata.num_rows
            continue
        with file.open(encoding="utf-8", errors="replace", newline="") as handle:
            filled: Iterator[Any]
            if kind == "csv":  # after the header, rows with a cell that is not blank
                lines = islice(csv.reader(handle), 1, None)
                filled = (line for line in lines if any(cell.strip() for cell in line))
            else:
                filled = (line for line in handle if line.strip())
            rows += sum(1 for _ in islice(filled, limit - rows))
    return rows


def _data_files(path: Path) -> list[Path]:
    """``path``, or the files in the folder ``path`` and below, that Ray reads: neither hidden
    nor ``_``-prefixed."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return [p for p in files if p.name[0] not in "._"]


def read_input(path: Path) -> Any:
    """A Ray dataset over ``path`` (a file, or a folder of files of one kind)."""
    import ray.data

    if path.is_dir():
        kinds = {INPUT_KINDS.get(p.suffix.lower()) for p in _data_files(path)}
        if len(kinds) != 1 or None in kinds:
            raise UsageError(
                f"{path}: a folder to read must hold files of one kind: .jsonl, .csv or .parquet"
            )
        kind = kinds.pop() or ""
    elif path.is_file():
        kind = INPUT_KINDS.get(path.suffix.lower(), "")
        if not kind:
            raise UsageError(
                f"{path}: --engine ray reads .jsonl, .csv or .parquet (a file or a folder)"
            )
    else:
        raise UsageError(f"{path}: no such file or folder")
    suffixes = [s.lstrip(".") for s, k in INPUT_KINDS.items() if k == kind]
    reader = getattr(ray.data, "read_" + {"jsonl": "json"}.get(kind, kind))  # read_csv, ...
    return reader(str(path.resolve()), file_extensions=suffixes)


class OutputError(UsageError):
    """--out exists and is not this command's output."""


# a row saved in one of these states is not scored again (the single-process rule)
DONE = ("scored", "skipped")
# columns a Parquet part adds to the input's, besides score_dataset's
PART_COLUMNS = ("format", "row")


def open_output(path: Path, input_path: Path) -> JsonlOutput | ParquetOutput:
    """The writer for ``path``, locked: the JSONL report for ``*.jsonl``, Parquet parts in a
    folder otherwise; refuses, untouched, an output not ours, the input, or one in use."""
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return JsonlOutput(path, input_path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{path}: give --out a .jsonl file or a folder for Parquet parts")
    if same_file(path, input_path):
        raise OutputError(f"--out {path} is the input; give --out a new folder")
    parts = ParquetOutput(path)
    parts.lock()
    return parts


class JsonlOutput:
    """The report ``score`` writes (:class:`.output.jsonl.ReportFile`), its lines in the order
    written (Ray does not keep input order)."""

    columns: tuple[str, ...] = ()

    def __init__(self, path: Path, input_path: Path):
        self.report = ReportFile(path, input_path=input_path)  # refuses a file not ours
        self.report.lock()
        self.set_aside = 0

    def done_keys(self) -> set[str]:
        """Keys of rows saved scored (or set aside), which a re-run skips."""
        status = self.report.status
        self.set_aside = sum(1 for key in self.report.index if status(key) == "skipped")
        return {key for key in self.report.index if status(key) in DONE}

    def save(self, batches: Iterable[Any], scorer: Scorer) -> Iterator[Any]:
        """Append one report line per row of each batch (a pyarrow Table); yield the batch."""
        from ..ray.engine import KEY_COLUMN, OUTPUT_COLUMNS

        report = self.report
        labels = (scorer.judge_label, scorer.embeddings_label)
        scored = {KEY_COLUMN, *OUTPUT_COLUMNS, "user_input", "response"}
        report.begin()
        for batch in batches:
            for row in batch.to_pylist():
                extra = {k: _finite(v) for k, v in row.items() if k not in scored}
                line = report_line(
                    report.lines + 1,
                    row[KEY_COLUMN],
                    _report(row, scorer),
                    *labels,
                    extra,
                    skipped=set_aside(row["error"]),
                )
                report.write(row[KEY_COLUMN], line)
            yield batch
        report.deduplicate()

    def close(self) -> None:
        self.report.close()


def _report(row: dict[str, Any], scorer: Scorer) -> dict[str, Any]:
    """The row's report as a dict: the actor's, or one saying why the row has none."""
    if row["report"] is not None:
        return json.loads(row["report"])
    texts = as_text(row["user_input"]), as_text(row["response"])
    return unscored(scorer.settings, *texts, row["error"], reason=row["reason"]).to_dict()


def set_aside(error: str | None) -> str | None:
    """The problem of a row set aside unscored (its error says ``skipped: PROBLEM``), else None."""
    if error is not None and error.startswith(SKIPPED):
        return error[len(SKIPPED) :]
    return None


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


class ParquetOutput:
    """A folder of ``part-RUN-N.parquet`` files, each written whole then renamed into place,
    with the input's columns, ``score_dataset``'s, and a report line's ``format`` and ``row``
    (a folder is ours when every row passes the report's rule); ``PATH.lock`` keeps others out.
    Written here, not by Ray's ``write_parquet``, which writes each file in place on whichever
    node (a run cut off mid-write leaves a part no resume reads) and numbers no rows.
    """

    columns = PART_COLUMNS

    def __init__(self, path: Path):
        self.path = through_link(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self._lock = PidLock(self.lock_path)
        self.run = uuid.uuid4().hex[:12]
        self.parts = 0
        self.rows = 0
        self.set_aside = 0

    def lock(self) -> None:
        """Take ``PATH.lock``; :class:`ReportLockError` naming the holder's pid if taken."""
        take_lock(self._lock, self.path, self.lock_path, "folder")

    def done_keys(self) -> set[str]:
        """Keys of rows saved without an error or set aside; refuses, untouched, a folder not
        ours. Parts of ours cut off before their rename go once the folder passed."""
        import pyarrow.parquet as pq

        if not self.path.exists():
            return set()
        keys: set[str] = set()
        aside: set[str] = set()
        cut_off: list[Path] = []
        for entry in sorted(self.path.iterdir()):
            if entry.name.startswith(".part-") and entry.name.endswith(".tmp"):
                cut_off.append(entry)
                continue
            if not (entry.name.startswith("part-") and entry.suffix == ".parquet"):
                self._refuse(entry.name)
            try:
                table = pq.read_table(entry, columns=[*PART_COLUMNS, "key", "error"])
            except Exception:  # not Parquet, or not ours
                self._refuse(entry.name)
            for record in table.to_pylist():
                if not is_report_record(record):
                    self._refuse(entry.name)
                if record["error"] is None:
                    keys.add(record["key"])
                elif set_aside(record["error"]) is not None:
                    aside.add(record["key"])
            self.rows += table.num_rows
        if self._lock.held:
            for entry in cut_off:
                entry.unlink(missing_ok=True)
        self.set_aside = len(aside)
        return keys | aside

    def _refuse(self, name: str) -> NoReturn:
        raise OutputError(
            f"{self.path}: holds {name}, which this command did not write; give --out a new folder"
        )

    def save(self, batches: Iterable[Any], scorer: Scorer) -> Iterator[Any]:
        """Write each batch as one more part: a hidden temp file, renamed when complete."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.path.mkdir(parents=True, exist_ok=True)
        for batch in batches:
            if batch.num_rows:
                self.parts += 1
                rows = pa.array(range(self.rows + 1, self.rows + batch.num_rows + 1), pa.int64())
                self.rows += batch.num_rows
                part = batch.append_column("format", pa.array([FORMAT] * batch.num_rows))
                part = part.append_column("row", rows)
                name = f"part-{self.run}-{self.parts:06d}.parquet"
                temp = self.path / f".{name}.tmp"
                pq.write_table(part, temp)
                os.replace(temp, self.path / name)
            yield batch

    def close(self) -> None:
        self._lock.release()


@dataclass
class Tally:
    """Running counts over the streamed rows, and the few lowest scores."""

    rows: int = 0
    scored: int = 0
    total: float = 0.0
    first_error: str | None = None
    lowest: list[tuple[float, int, str]] = field(default_factory=list)

    def usages(self, batches: Iterable[Any]) -> Iterator[Usage | None]:
        """Count each batch (pyarrow Tables) as it passes, and yield each row's usage (None: not
        measured), leaving out rows set aside as ``score`` leaves them out of its cost."""
        for batch in batches:
            columns = (batch[c].to_pylist() for c in ("score", "error", "user_input", "report"))
            for score, error, question, report in zip(*columns, strict=True):
                self.rows += 1
                if score is None or not math.isfinite(score):
                    self.first_error = self.first_error or error
                else:
                    self.scored += 1
                    self.total += score
                    heapq.heappush(self.lowest, (-score, self.rows, str(question)))
                    if len(self.lowest) > LOWEST_SHOWN:
                        heapq.heappop(self.lowest)
                if set_aside(error) is None:
                    yield None if report is None else Usage.from_dict(json.loads(report)["usage"])

    def show(self, console: Any, out: Path, cost: CostSummary | None = None) -> None:
        """Rows written, scored or NaN, the mean, usage and cost, and the lowest scores."""
        from .output.console import print_cost

        mean = fmt(self.total / self.scored) if self.scored else "NaN"
        console.print(
            f"wrote {self.rows} row(s) to {out}: {self.scored} scored (mean {mean}), "
            f"{self.rows - self.scored} NaN",
            soft_wrap=True,
        )
        if cost is not None:
            print_cost(console, cost)
        for negative, _, question in sorted(self.lowest, reverse=True):
            console.print(f"  {fmt(-negative)}  {clip(question, 90)}", soft_wrap=True)
        if self.first_error:
            console.print(f"first NaN: {clip(self.first_error, 200)}", soft_wrap=True)
