"""``ragas-relevancy score INPUT --engine ray``: read with Ray Data, score on a pool of actors.

INPUT is a JSONL, CSV or Parquet file, or a folder of them, read by Ray's own readers. Rows are
scored by :func:`ragas_relevancy_ext.ray_engine.score_dataset` and streamed back to this process,
which writes ``--out``: a ``.jsonl`` file, or else a folder of Parquet parts. Each part and each
line is saved as it arrives, so a crash keeps what was written; a re-run with the same ``--out``
skips every row whose content key is there without an error. Ray is imported only here, inside
:func:`run_ray_score`: the options below cost nothing to declare.
"""

from __future__ import annotations

import heapq
import json
import math
import os
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields, replace
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from ..report import clip, fmt
from .errors import UsageError, exit_code
from .setup import Settings, prepare

__all__ = [
    "ActorsOpt",
    "Engine",
    "EngineOpt",
    "RayAddressOpt",
    "SettingsMetric",
    "run_ray_score",
    "settings_key",
]

RAY_EXTRA = "pip install 'ragas-relevancy-ext[ray]'"

Engine = Enum("Engine", {"local": "local", "ray": "ray"}, type=str)  # type: ignore[misc]
Engine.__doc__ = "Where rows are scored."

EngineOpt = Annotated[
    Engine,
    typer.Option(
        help="local: in this process. ray: on Ray Data actors, for big files or folders of "
        ".jsonl, .csv or .parquet; writes --out and prints a summary, not every row "
        f"({RAY_EXTRA}).",
    ),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(metavar="ADDR", help="Ray cluster to join (default: start Ray on this machine)."),
]
ActorsOpt = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Ray actors scoring at once (default 2); each keeps --concurrency calls in flight.",
    ),
]

# Input kinds Ray reads, by file suffix.
INPUT_KINDS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet"}
# Settings that change a score; the others (concurrency, retries, cache) do not.
SCORE_SETTINGS = (
    "judge",
    "base_url",
    "embeddings",
    "embeddings_base_url",
    "one_text_per_call",
    "strictness",
    "probe_prompt",
    "language",
)
RUN_SETTINGS = (
    "max_retries",
    "timeout",
    "concurrency",
    "cache",
    "batch_embeddings",
    "analytics",
)
DEFAULT_ACTORS = 2
ROWS_PER_CALL_IN_FLIGHT = 8  # batch size = this x --concurrency
LOWEST_SHOWN = 5


class RayOptionError(UsageError):
    """An option that does not go with --engine ray, or the other way round."""


@dataclass(frozen=True)
class SettingsMetric:
    """A picklable metric factory: each Ray actor builds judge, embeddings and metric itself."""

    settings: Settings

    def __call__(self) -> Any:
        return prepare(self.settings).metric()


def settings_key(settings: Settings) -> str:
    """The settings that change a score, as JSON: part of every row's content key."""
    values = {name: getattr(settings, name) for name in SCORE_SETTINGS}
    return json.dumps(values, sort_keys=True, default=str)


def run_ray_score(
    file: Path,
    map_specs: list[str] | None,
    settings: Settings,
    *,
    engine: Any,
    address: str | None,
    actors: int | None,
    out: Path | None,
    outputs: dict[str, Path] | None = None,
    progress: bool = True,
) -> int:
    """Score ``file`` on Ray actors into ``out``; the exit code as :func:`.errors.exit_code`."""
    _check_options(engine, address, actors, out, outputs)
    assert out is not None
    from .datafile import parse_map
    from .output.console import make_console, print_header

    mapping = parse_map(map_specs or [])
    sink = open_output(out)
    setup = prepare(settings)  # a bad judge spec or a missing key fails here, before Ray starts
    done = sink.done_keys()

    try:
        import ray

        from .. import ray_engine
    except ImportError:
        raise UsageError(f"--engine ray needs Ray: {RAY_EXTRA}") from None
    if settings.cache is not None:  # the actors' working folder may differ from this one
        settings = replace(settings, cache=settings.cache.resolve())
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False)
    ray.data.DataContext.get_current().enable_progress_bars = progress
    ds = read_input(file)
    if mapping:
        ds = ds.rename_columns(mapping)
    try:
        ray_engine.check_columns(ds.schema().names, "user_input", "response")
    except ValueError as exc:
        raise UsageError(f"{file}: {exc}; name yours with --map COLUMN=user_input") from None

    console = make_console()
    count = actors or DEFAULT_ACTORS
    print_header(
        console,
        {
            "input": str(file),
            "engine": f"ray, {count} actor(s) x {settings.concurrency} call(s) in flight",
            "judge": setup.judge_label,
            "embeddings": setup.embeddings.label,
            "probes": f"{settings.probe_prompt} prompt, strictness {settings.strictness}",
            "output": f"{out} ({len(done)} row(s) already there, skipped)",
        },
    )
    scored = ray_engine.score_dataset(
        ds,
        SettingsMetric(settings),
        concurrency=count,
        batch_size=ROWS_PER_CALL_IN_FLIGHT * settings.concurrency,
        settings_key=settings_key(settings),
        skip_keys=done,
    )
    tally = Tally()
    for batch in sink.save(scored.iter_batches(batch_format="pyarrow", batch_size=None)):
        tally.add(batch)
    tally.show(console, out)
    # rows already in --out were scored without an error before: they count as scored
    return exit_code(tally.scored + len(done), tally.rows + len(done))


def _check_options(
    engine: Any,
    address: str | None,
    actors: int | None,
    out: Path | None,
    outputs: dict[str, Path] | None,
) -> None:
    if getattr(engine, "value", engine) != "ray":
        given = [
            name for name, value in (("--ray-address", address), ("--actors", actors)) if value
        ]
        raise RayOptionError(f"{' and '.join(given)} go(es) with --engine ray")
    if out is None:
        raise RayOptionError(
            "--engine ray writes to --out: a .jsonl file or a folder for Parquet parts"
        )
    if outputs:
        names = ", ".join(f"--{name}" for name in outputs)
        raise RayOptionError(f"{names} is not available with --engine ray; read --out instead")


def read_input(path: Path) -> Any:
    """A Ray dataset over ``path`` (a file, or a folder of files of one kind)."""
    import ray.data

    if path.is_dir():
        kinds = {
            INPUT_KINDS.get(p.suffix.lower())
            for p in path.rglob("*")
            if p.is_file() and not p.name.startswith((".", "_"))
        }
        if len(kinds) != 1 or None in kinds:
            raise UsageError(
                f"{path}: a folder to read must hold files of one kind: .jsonl, .csv or .parquet"
            )
        kind = kinds.pop()
    elif path.is_file():
        kind = INPUT_KINDS.get(path.suffix.lower())
        if kind is None:
            raise UsageError(
                f"{path}: --engine ray reads .jsonl, .csv or .parquet (a file or a folder)"
            )
    else:
        raise UsageError(f"{path}: no such file or folder")
    suffixes = [s.lstrip(".") for s, k in INPUT_KINDS.items() if k == kind]
    reader = {"jsonl": ray.data.read_json, "csv": ray.data.read_csv}.get(
        kind, ray.data.read_parquet
    )
    return reader(str(path.resolve()), file_extensions=suffixes)


# -- output ---------------------------------------------------------------------------------


class OutputError(UsageError):
    """--out exists and is not this command's output."""


RECORD_MARK = ("key", "score", "reason", "error", "report")


def open_output(path: Path) -> JsonlOutput | ParquetOutput:
    """The writer for ``path``: JSON lines for ``*.jsonl``, Parquet parts in a folder otherwise."""
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return JsonlOutput(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{path}: give --out a .jsonl file or a folder for Parquet parts")
    return ParquetOutput(path)


class JsonlOutput:
    """One JSON object per row: the input's columns and ``key score reason error report``."""

    def __init__(self, path: Path):
        self.path = path

    def done_keys(self) -> set[str]:
        """Keys of rows saved without an error; refuses a file this command did not write."""
        if not self.path.exists():
            return set()
        if self.path.is_dir():
            raise OutputError(f"{self.path}: is a folder; a .jsonl --out must be a file")
        keys: set[str] = set()
        complete = 0
        with self.path.open("rb") as handle:
            for number, raw in enumerate(handle, 1):
                if not raw.endswith(b"\n"):
                    break  # cut off mid-write: dropped below, once the rest is known to be ours
                record = _record(raw)
                if record is None:
                    raise OutputError(
                        f"{self.path}: line {number} is not a scored row; give --out a new file"
                    )
                complete += len(raw)
                if record["error"] is None:
                    keys.add(record["key"])
        if complete < self.path.stat().st_size:
            os.truncate(self.path, complete)
        return keys

    def save(self, batches: Iterable[Any]) -> Iterator[Any]:
        """Append one line per row of each batch (a pyarrow Table), flushed; yield the batch."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            for batch in batches:
                handle.write(
                    "".join(
                        json.dumps(_finite(row), ensure_ascii=False, allow_nan=False, default=str)
                        + "\n"
                        for row in batch.to_pylist()
                    )
                )
                handle.flush()
                yield batch


def _record(raw: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(record, dict) or not all(k in record for k in RECORD_MARK):
        return None
    return record


def _finite(row: dict[str, Any]) -> dict[str, Any]:
    score = row.get("score")
    if isinstance(score, float) and not math.isfinite(score):
        row["score"] = None
    return row


class ParquetOutput:
    """A folder of ``part-RUN-N.parquet`` files, each written whole then renamed into place."""

    def __init__(self, path: Path):
        self.path = path
        self.run = uuid.uuid4().hex[:12]
        self.parts = 0

    def done_keys(self) -> set[str]:
        """Keys of rows saved without an error; refuses a folder this command did not write."""
        import pyarrow.parquet as pq

        if not self.path.exists():
            return set()
        keys: set[str] = set()
        for entry in sorted(self.path.iterdir()):
            if entry.name.startswith(".part-") and entry.name.endswith(".tmp"):
                entry.unlink()  # our own part, cut off before its rename
                continue
            if not (entry.name.startswith("part-") and entry.suffix == ".parquet"):
                raise OutputError(
                    f"{self.path}: holds {entry.name}, which this command did not write; "
                    "give --out a new folder"
                )
            try:
                table = pq.read_table(entry, columns=["key", "error"])
            except Exception as exc:  # not Parquet, or not ours
                raise OutputError(
                    f"{entry}: not a scored part ({exc}); give --out a new folder"
                ) from None
            for key, error in zip(
                table["key"].to_pylist(), table["error"].to_pylist(), strict=True
            ):
                if error is None:
                    keys.add(key)
        return keys

    def save(self, batches: Iterable[Any]) -> Iterator[Any]:
        """Write each batch as one more part: a hidden temp file, renamed when complete."""
        import pyarrow.parquet as pq

        self.path.mkdir(parents=True, exist_ok=True)
        for batch in batches:
            if batch.num_rows:
                self.parts += 1
                name = f"part-{self.run}-{self.parts:06d}.parquet"
                temp = self.path / f".{name}.tmp"
                pq.write_table(batch, temp)
                os.replace(temp, self.path / name)
            yield batch


# -- the summary ----------------------------------------------------------------------------


@dataclass
class Tally:
    """Running counts over the streamed rows, and the few lowest scores."""

    rows: int = 0
    scored: int = 0
    total: float = 0.0
    first_error: str | None = None

    def __post_init__(self) -> None:
        self.lowest: list[tuple[float, int, str]] = []

    def add(self, batch: Any) -> None:
        """Count one batch (a pyarrow Table with score, error and user_input)."""
        scores = batch["score"].to_pylist()
        errors = batch["error"].to_pylist()
        questions = batch["user_input"].to_pylist()
        for score, error, question in zip(scores, errors, questions, strict=True):
            self.rows += 1
            if score is None or not math.isfinite(score):
                self.first_error = self.first_error or error
                continue
            self.scored += 1
            self.total += score
            item = (-score, self.rows, str(question))
            if len(self.lowest) < LOWEST_SHOWN:
                heapq.heappush(self.lowest, item)
            else:
                heapq.heappushpop(self.lowest, item)

    def show(self, console: Any, out: Path) -> None:
        """Rows written, how many scored or NaN, the mean and the lowest scores."""
        mean = fmt(self.total / self.scored) if self.scored else "NaN"
        console.print(
            f"wrote {self.rows} row(s) to {out}: {self.scored} scored (mean {mean}), "
            f"{self.rows - self.scored} NaN",
            soft_wrap=True,
        )
        for negative, _, question in sorted(self.lowest, reverse=True):
            console.print(f"  {fmt(-negative)}  {clip(question, 90)}", soft_wrap=True)
        if self.first_error:
            console.print(f"first NaN: {clip(self.first_error, 200)}", soft_wrap=True)


# a new setting must say whether it changes a score (then it is part of every content key)
assert {f.name for f in fields(Settings)} == {*SCORE_SETTINGS, *RUN_SETTINGS}
