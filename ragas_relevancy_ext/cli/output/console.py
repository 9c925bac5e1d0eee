"""What the commands print: tables of scores and probes, summaries, a progress bar. Data reaches
rich as :class:`rich.text.Text`, never markup, its control and bidi characters shown as codes."""

from __future__ import annotations

import contextlib
import io
import itertools
import math
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, Protocol, cast

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column, Table
from rich.text import Text

from ...scoring.report import (
    SKIPPED,
    RelevancyReport,
    clip,
    fmt,
    language_tag,
    neutralise_controls,
    not_scored_cause,
    pull_downs,
    weak_point,
)
from . import Item

if TYPE_CHECKING:
    from ..datafile import Scan
    from ..setup import Settings
    from ..stats import Agreement, CostSummary, Spread, Summary

PIPED_WIDTH = 120


def make_console(stderr: bool = False) -> Console:
    """A :class:`TerminalConsole` on stdout (or stderr) reading no markup; piped, 120 columns
    wide at most, no line ending in spaces."""
    stream = sys.stderr if stderr else sys.stdout
    plain: dict[str, Any] = {"highlight": False, "markup": False, "soft_wrap": True}
    console = TerminalConsole(file=stream, **plain)
    if not console.is_terminal:
        width = None if "COLUMNS" in os.environ else PIPED_WIDTH
        console = TerminalConsole(file=cast(IO[str], TrimmedLines(stream)), width=width, **plain)
    return console


class TerminalConsole(Console):
    """A console showing the control and bidi characters of every string, text and table cell
    as codes (rich would drop BEL, BS, VT, FF and CR from a :class:`Text`)."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(neutralise_controls(text), **kwargs)

    def render(self, renderable: Any, options: Any = None) -> Iterable[Any]:
        if isinstance(renderable, Text):
            renderable = neutralised_text(renderable)
        return super().render(renderable, options)


def neutralised_text(text: Text) -> Text:
    """``text`` with its control characters shown as codes, its spans moved with them."""
    plain = text.plain
    shown = neutralise_controls(plain)
    if shown == plain:
        return text
    # where each character of ``plain`` ends in ``shown``
    ends = [0, *itertools.accumulate(len(neutralise_controls(char)) for char in plain)]
    copy = text.blank_copy(shown)
    for span in text.spans:
        copy.stylize(span.style, ends[min(span.start, len(plain))], ends[min(span.end, len(plain))])
    return copy


class TrimmedLines(io.TextIOBase):
    """Writes to ``stream`` with each line's trailing spaces cut (piped tables are not padded)."""

    def __init__(self, stream: IO[str]):
        self._stream = stream
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        head, newline, self._pending = (self._pending + text).rpartition("\n")
        if newline:
            self._stream.write("\n".join(line.rstrip(" ") for line in head.split("\n")) + "\n")
        return len(text)

    def flush(self) -> None:
        if self._stream.closed:  # closed first (a test runner's stream): nothing to write to
            return
        if self._pending:
            self._stream.write(self._pending)
            self._pending = ""
        self._stream.flush()


def simple_table(*columns: str | Column, **options: Any) -> Table:
    """A table in the one style every command prints: a rule under the header, no edges."""
    return Table(*columns, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, **options)


def right(*headers: str, **options: Any) -> list[Column]:
    """Right-aligned columns (numbers), one per header, all with ``options``."""
    return [Column(header, justify="right", **options) for header in headers]


def print_lines(console: Console, *lines: str, style: str = "", **options: Any) -> None:
    """Each line as one :class:`Text` (never markup) in ``style``."""
    for line in lines:
        console.print(Text(line, style=style), **options)


def print_header(console: Console, fields: Mapping[str, str]) -> None:
    """``name: value`` lines saying what the run used."""
    for name, value in fields.items():
        line = Text(f"{name}: ", style="dim")
        line.append(neutralise_controls(value, one_line=True))  # one line, whatever it holds
        console.print(line, soft_wrap=not console.is_terminal)  # words kept whole on a terminal


class Labels(Protocol):
    """What a run's header reads: a built scorer's, or the settings checked before it is built."""

    @property
    def settings(self) -> Settings: ...
    @property
    def judge_label(self) -> str: ...
    @property
    def embeddings_label(self) -> str: ...


def run_fields(data: Scan, scorer: Labels, **extra: str) -> dict[str, str]:
    """:func:`used_fields` with the file read and its row count (bad rows counted)."""
    rows = data.row_count + data.bad_count
    read = {"file": f"{data.path} ({rows} row(s), {data.bad_count} bad)"}
    return used_fields(read, scorer, **extra)


def used_fields(first: Mapping[str, str], scorer: Labels, **extra: str) -> dict[str, str]:
    """A run's header, redacted: ``first``, the judge, embeddings and probes ``scorer`` uses,
    ``extra``, and a ``caution`` for the offline judge."""
    from ...scoring.redaction import redact

    settings = scorer.settings
    fields = {
        **first,
        "judge": scorer.judge_label,
        "embeddings": scorer.embeddings_label,
        "probes": f"{settings.probe_prompt} prompt, strictness {settings.strictness}, "
        f"language {settings.language}",
        **extra,
    }
    if is_offline(scorer):
        fields["caution"] = OFFLINE_CAUTION
    return {name: redact(str(value)) for name, value in fields.items()}


OFFLINE_CAUTION = (
    "the offline judge makes each probe from the answer's first sentence, so these scores show "
    "how the metric works, not how good the answers are; use --judge openai:MODEL for real scores"
)


def is_offline(scorer: Labels) -> bool:
    """True when the judge is the offline stand-in (scores show mechanics, not quality)."""
    return scorer.settings.judge.strip().lower() == "offline"


def print_caution(console: Console, fields: Mapping[str, str]) -> None:
    """The run's caution, if any, on one highlighted line."""
    if "caution" in fields:
        caution = f"caution: {fields['caution']}"
        print_lines(console, caution, style="bold yellow", soft_wrap=not console.is_terminal)


def print_warnings(console: Console, warnings: Sequence[str]) -> None:
    """``warning: ...`` lines (stderr) about the input."""
    lines = [f"warning: {neutralise_controls(warning, one_line=True)}" for warning in warnings]
    print_lines(console, *lines, style="yellow")


@contextlib.contextmanager
def status_line(text: str, enabled: bool = True) -> Iterator[Callable[[str], None]]:
    """A spinner with ``text`` on stderr while a slow step runs (terminals only); yields a
    function that changes the text."""
    console = Console(file=sys.stderr)
    if not enabled or not console.is_terminal:
        yield lambda text: None
        return
    with console.status(text) as status:
        yield lambda text: status.update(text)


TEXT_HEADER = "question, response (>), probes (nc = noncommittal)"


def print_scores(
    console: Console,
    items: Iterable[Item],
    probes: bool = True,
    reasons: bool = False,
    rows: int = 0,
) -> None:
    """The per-row table, a sample at a time: row, score, question; beneath, the response (and
    the score's standard error), each probe with its cosine, the notes, and the reason when
    ``reasons`` (always when not scored or 0). A sample is one styled text, not rich's per-cell
    layout, so a long table prints fast; ``rows``: the largest row number."""
    width = max(3, len(str(rows)))
    head = f"{'row':>{width}}   {'score':>6}   {'cosine':>6}   {TEXT_HEADER}"
    print_lines(console, head, style="bold")
    indent = "\n" + " " * (width + 21)  # a cell's own line breaks stay in its column
    for number, report in items:
        sample = Text()
        for row, (score, style), cosine, text in _sample_lines(number, report, probes, reasons):
            sample.append(f"{row:>{width}}", "dim").append("   ")
            sample.append(f"{score:>6}", style).append(f"   {cosine:>6}   ")
            for part, part_style in text:
                sample.append(part.expandtabs().replace("\n", indent), part_style)
            sample.append("\n")
        sample.append("\n")  # a blank line between samples
        console.print(sample, end="", soft_wrap=True)


Cell = tuple[str, str]  # a text and its style


def _sample_lines(
    number: int, report: RelevancyReport, probes: bool, reasons: bool
) -> Iterator[tuple[str, Cell, str, list[Cell]]]:
    """One sample's lines of the table: row, score, cosine and the text's parts, neutralised."""
    blank, score = ("", ""), (fmt(report.score), _score_style(report.score))
    yield str(number), score, "", [(clip(report.user_input, 300), "bold")]
    se = report.score_stderr
    spread = (f"±{se:.3f}", "dim") if se is not None and math.isfinite(se) else blank
    yield "", spread, "", [("> " + clip(report.response, 300), "dim")]
    if probes:
        pulls = {id(probe): pull for probe, pull in pull_downs(report)}
        for probe in report.probes:
            line = [(neutralise_controls(probe.question), "")]
            if probe.noncommittal:
                line.append(("  nc", "yellow"))
            if id(probe) in pulls:
                line.append((f"  pulled the score down by {pulls[id(probe)]:.2f}", "magenta"))
            line.append((language_tag(probe.language, report.question_language), "cyan"))
            yield "", blank, fmt(probe.cosine, 2), line
        for note in report.notes:
            yield "", blank, "", [(f"note: {neutralise_controls(note)}", "yellow")]
    reason = neutralise_controls(report.reason)
    if report.error or not report.probes or report.all_noncommittal:
        yield "", blank, "", [(reason, "red")]
    elif reasons:
        yield "", blank, "", [(reason, "italic")]


def _score_style(score: float) -> str:
    if not math.isfinite(score) or score < 0.5:
        return "red"
    return "yellow" if score < 0.75 else "green"


def print_cost(console: Console, cost: CostSummary, prefix: str = "") -> None:
    """Usage totals, per-row means and the cost."""
    print_lines(console, *(prefix + line for line in cost.lines()), soft_wrap=True)


def print_summary(
    console: Console, summary: Summary, reports: Mapping[int, RelevancyReport] | None = None
) -> None:
    """Mean, median, zeros, NaNs and the lowest scores (with what pulled each down, given
    ``reports`` by row number)."""
    figures = f"mean {fmt(summary.mean)} | median {fmt(summary.median)} | score 0: {summary.zeros}"
    head = (
        f"{summary.n} sample(s), {summary.scored} scored | {figures} | NaN: {summary.nans_text()}"
    )
    print_lines(console, head, style="bold")
    if (bars := summary.error_bars) is not None:
        print_lines(console, f"mean {bars.interval_text()} | {bars.variance_text()}")
    if summary.cost is not None:
        print_cost(console, summary.cost)
    if summary.lowest:
        print_lines(console, f"{summary.lowest_title()}:", style="dim")
        for low in summary.lowest:
            line = Text(f"  row {low.number:>4}  {fmt(low.score)}  {clip(low.user_input, 60)}")
            report = (reports or {}).get(low.number)
            if report is not None:
                line.append(f"  ({weak_point(report)})", style="dim")
            console.print(line)


def print_causes(console: Console, items: Iterable[Item]) -> None:
    """One line per cause of NaN rows (skipped rows aside): how many, and the first's reason."""
    first: dict[str, Item] = {}
    counts: Counter[str] = Counter()
    for number, report in items:
        if not (math.isfinite(report.score) or (report.error or "").startswith(SKIPPED)):
            cause = not_scored_cause(report)
            counts[cause] += 1
            first.setdefault(cause, (number, report))
    for cause, (number, report) in first.items():
        reason = f"row {number}: {clip(report.reason, 300)}"
        print_lines(console, f"not scored ({cause}): {counts[cause]} row(s); {reason}")


def print_bad_rows(console: Console, lines: Sequence[str], skipped: int) -> None:
    """The rows that were set aside, by line number."""
    if lines:
        print_lines(console, f"skipped {skipped} bad row(s):", style="yellow")
        print_lines(console, *(f"  {neutralise_controls(line, one_line=True)}" for line in lines))


@contextlib.contextmanager
def progress_bar(total: int, label: str, enabled: bool) -> Iterator[Callable[[], None]]:
    """A transient bar on stderr; yields a function to call once per finished sample."""
    console = Console(file=sys.stderr)
    if not enabled or total < 2 or not console.is_terminal:
        yield lambda: None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda: bar.advance(task)


def print_agreement(console: Console, agreement: Agreement, ratings: str) -> None:
    """Pearson and Spearman with their bootstrap intervals."""
    table = simple_table(f"score vs {ratings}", *right("r", "95% interval"))
    for name, value, (low, high) in (
        ("Pearson", agreement.pearson, agreement.pearson_interval),
        ("Spearman", agreement.spearman, agreement.spearman_interval),
    ):
        table.add_row(name, fmt(value, 3), f"[{fmt(low, 3)}, {fmt(high, 3)}]")
    console.print(table)
    dropped = f"; {agreement.dropped} NaN score(s) left out" if agreement.dropped else ""
    how = f"percentile bootstrap, {agreement.resamples} resamples, seed {agreement.seed}"
    print_lines(console, f"n = {agreement.n} pair(s){dropped}; {how}", style="dim")


def print_spread(
    console: Console,
    numbers: Sequence[int],
    questions: Sequence[str],
    spread: Spread,
    deterministic: bool = False,
) -> None:
    """Per-sample mean and standard deviation over repeats, largest first, then the mean; why
    every deviation is 0 when so (``deterministic``: the judge is the offline one)."""
    table = simple_table(*right("row", style="dim"), *right("mean", "std"), "question")
    order = sorted(
        range(len(numbers)),
        key=lambda i: (-spread.deviations[i] if math.isfinite(spread.deviations[i]) else 1, i),
    )
    for i in order:
        question = Text(clip(questions[i], 70))
        table.add_row(str(numbers[i]), fmt(spread.means[i]), fmt(spread.deviations[i]), question)
    console.print(table)
    mean = f"mean standard deviation over {spread.repeats} repeats: {fmt(spread.mean_deviation)}"
    print_lines(console, mean, style="bold")
    finite = [d for d in spread.deviations if math.isfinite(d)]
    if finite and all(d == 0.0 for d in finite):
        why = (
            "the offline judge is deterministic: it writes the same probes every time"
            if deterministic
            else "the judge wrote the same probes every time (a temperature of 0, or a cache?)"
        )
        print_lines(console, f"std is 0 for every sample because {why}", style="yellow")
