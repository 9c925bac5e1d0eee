"""``ragas-relevancy diff A.jsonl B.jsonl``: is the change between two runs real?

Rows pair by question (``user_input``, whitespace runs made one, and ``--id COLUMN``), never by
response: a question asked twice pairs its first rows, then its second. The paired mean
difference B - A gets a 95% interval (clustered with ``--cluster``) and a p-value; exit 1 when B
is significantly lower by more than ``--margin``. No RAGAS, no judge, no network.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from ..scoring.report import RelevancyReport, clip, fmt, json_safe
from .errors import EXIT_FAILED, EXIT_OK, UsageError
from .options import ClusterOpt
from .output import check_outputs
from .output.console import make_console, print_header, print_lines, right, simple_table
from .output.files import OutputPathError, same_file, write_atomically
from .saved import SavedRun, cluster_labels

if TYPE_CHECKING:  # numpy loads when a command runs, not for --help
    from ..error_bars import PairedDifference

__all__ = ["Comparison", "compare_runs", "diff"]

TOP = 5


@dataclass(frozen=True)
class Comparison:
    """Two saved runs paired by question, and the paired difference of their scores."""

    a: SavedRun
    b: SavedRun
    pairs: list[tuple[int, int]]
    only_a: int
    only_b: int
    repeated: int
    result: PairedDifference

    def moved(self, top: int) -> list[tuple[int, int, float]]:
        """The ``top`` pairs (index in A, index in B, B - A) whose score moved most."""
        deltas = [(i, j, self.b.reports[j].score - self.a.reports[i].score) for i, j in self.pairs]
        finite = [d for d in deltas if math.isfinite(d[2])]
        return sorted(finite, key=lambda d: (-abs(d[2]), d[0]))[:top]


def compare_runs(
    a: SavedRun, b: SavedRun, id_column: str | None, cluster: str | None
) -> Comparison:
    """Pair ``a`` and ``b`` by question (and ``id_column``) and take the paired difference."""
    from ..error_bars import pair_by_question, paired_difference, question_key

    def keys(run: SavedRun) -> list[tuple[str, str]]:
        ids = [e.get(id_column) if id_column else None for e in run.extras]
        if id_column is not None and all(i is None for i in ids):
            raise UsageError(f"--id {id_column}: no row of {run.path} has that input column")
        return [question_key(r.user_input, i) for r, i in zip(run.reports, ids, strict=True)]

    pairing = pair_by_question(keys(a), keys(b))
    if not pairing.pairs:
        raise UsageError(f"no question of {a.path} is in {b.path}: nothing to pair")
    in_a = [i for i, _ in pairing.pairs]
    scores_b = [b.reports[j].score for _, j in pairing.pairs]
    labels = None
    if cluster is not None:
        labels = cluster_labels([a.reports[i] for i in in_a], [a.extras[i] for i in in_a], cluster)
    result = paired_difference([a.reports[i].score for i in in_a], scores_b, clusters=labels)
    if result.n_pairs < 2:
        raise UsageError(
            f"{result.n_pairs} pair(s) scored in both runs: at least 2 are needed for an interval"
        )
    return Comparison(
        a, b, pairing.pairs, len(pairing.only_a), len(pairing.only_b), pairing.repeated, result
    )


def diff(
    a: Annotated[Path, typer.Argument(metavar="A", help="The earlier run's JSONL report.")],
    b: Annotated[Path, typer.Argument(metavar="B", help="The later run's JSONL report.")],
    margin: Annotated[
        float,
        typer.Option(
            min=0.0,
            metavar="M",
            help="Exit 1 only when B is significantly lower than A by more than M.",
        ),
    ] = 0.0,
    id_: Annotated[
        str | None,
        typer.Option(
            "--id", metavar="COLUMN", help="Pair rows by this input column too (with the question)."
        ),
    ] = None,
    cluster: ClusterOpt = None,
    top: Annotated[
        int, typer.Option(min=0, metavar="K", help="Show the K rows that moved most.")
    ] = TOP,
    json_: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of the tables.")
    ] = False,
    html: Annotated[
        Path | None, typer.Option(metavar="PATH", help="Also write an HTML page of the comparison.")
    ] = None,
) -> int:
    """Is the change between two saved runs real?

    Rows pair by question; the mean difference B - A gets a 95% interval and a p-value.

    Exit codes: 0 no significant drop, 1 B significantly lower than A by more than --margin,
    2 bad input.
    """
    if html is not None:
        html = check_outputs({"html": html}, input_path=a)["html"]
        if same_file(html, b):
            raise OutputPathError(f"--html {html} is the input file; give --html a file of its own")
    comparison = compare_runs(SavedRun.read(a), SavedRun.read(b), id_, cluster)
    worse = comparison.result.worse_by_more_than(margin)
    if json_:
        print(json.dumps(json_safe(_summary(comparison, margin, id_, worse)), allow_nan=False))
    else:
        _print(comparison, margin, id_, worse, top)
    if html is not None:
        html.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(html, _page(comparison, margin, id_, worse, top).encode("utf-8"))
        if not json_:
            make_console().print(f"wrote {html}", soft_wrap=True)
    return EXIT_FAILED if worse else EXIT_OK


def _paired_by(id_column: str | None) -> str:
    return "question text" + (f" and input column {id_column!r}" if id_column else "")


def _summary(c: Comparison, margin: float, id_column: str | None, worse: bool) -> dict[str, Any]:
    r = c.result
    return {
        **{k: v for k, v in asdict(r).items() if k != "not_scored"},
        "only_in_a": c.only_a,
        "only_in_b": c.only_b,
        "not_scored": r.not_scored,
        "repeated_questions": c.repeated,
        "paired_by": _paired_by(id_column),
        "margin": margin,
        "significant_drop": worse,
    }


def _lines(c: Comparison, margin: float, id_column: str | None, worse: bool) -> list[str]:
    r = c.result
    from ..error_bars import FEW_CLUSTERS

    how = r.method + (f" over {r.clusters} clusters" if r.clusters else "")
    if r.clusters and r.clusters < FEW_CLUSTERS:
        how += f", under {FEW_CLUSTERS} clusters: a rough interval"
    by = f" by more than {margin:g}" if margin else ""
    verdict = f"no significant drop{by} (p = {fmt(r.p_value, 3)})"
    lines = [
        f"paired by {_paired_by(id_column)}: {r.n_pairs} pair(s) scored in both; "
        f"only in A {c.only_a}, only in B {c.only_b}, NaN in either {r.not_scored}",
        f"mean A {fmt(r.mean_a)} | mean B {fmt(r.mean_b)} | B - A {fmt(r.diff)} ± {fmt(r.stderr)} "
        f"({r.level:.0%} CI {fmt(r.ci_low)} to {fmt(r.ci_high)}, {how}) | p = {fmt(r.p_value, 4)}",
        f"B is significantly lower than A{by}: exit 1" if worse else verdict,
    ]
    if c.repeated:
        lines.append(
            f"{c.repeated} question(s) appear more than once in a file: their rows pair in row "
            "order; --id COLUMN pairs them by an id"
        )
    return lines


def _print(c: Comparison, margin: float, id_column: str | None, worse: bool, top: int) -> None:
    console = make_console()
    runs = {"A": c.a, "B": c.b}
    print_header(console, {k: f"{run.path} ({len(run.reports)} rows)" for k, run in runs.items()})
    for number, line in enumerate(_lines(c, margin, id_column, worse)):
        style = "bold" if number == 1 else ("red" if worse and number == 2 else "")
        print_lines(console, line, style=style)
    moved = c.moved(top)
    if not moved:
        return
    print_lines(console, f"moved most ({len(moved)}):", style="dim")
    table = simple_table(
        *right("rows A/B", style="dim", no_wrap=True),
        *right("A", "B", "B - A", no_wrap=True),
        "A's probes",
        "B's probes",
    )
    for i, j, delta in moved:
        ra, rb = c.a.reports[i], c.b.reports[j]
        rows, question = f"{c.a.numbers[i]}/{c.b.numbers[j]}", clip(ra.user_input, 200)
        change = Text(f"{delta:+.4f}", style="red" if delta < 0 else "green")
        table.add_row(rows, fmt(ra.score), fmt(rb.score), change, Text(question, style="bold"), "")
        table.add_row("", "", "", "", _probes(ra), _probes(rb))
        table.add_section()
    console.print(table)


def _probes(report: RelevancyReport) -> Text:
    lines = [f"> {clip(report.response, 160)}"]
    lines += [f"{fmt(p.cosine, 2)} {clip(p.question, 120)}" for p in report.probes]
    return Text("\n".join(lines))


def _page(c: Comparison, margin: float, id_column: str | None, worse: bool, top: int) -> str:
    """A self-contained page in the style of the run pages (:mod:`.output.html`)."""
    from .output.html import change_class, long_text, page_head, stats_list, text

    r = c.result
    figures = [
        (str(r.n_pairs), "pairs"),
        (fmt(r.mean_a), "mean A"),
        (fmt(r.mean_b), "mean B"),
        (f"{fmt(r.diff)} ± {fmt(r.stderr)}", "B - A ± standard error"),
        (f"{fmt(r.ci_low)} to {fmt(r.ci_high)}", f"{r.level:.0%} CI ({r.method})"),
        (fmt(r.p_value, 4), "p-value"),
        (str(c.only_a), "only in A"),
        (str(c.only_b), "only in B"),
    ]

    def probes(report: RelevancyReport) -> str:
        rows = "".join(
            f'<tr><td class="num">{fmt(p.cosine, 2)}</td><td>{long_text(p.question, "probe")}</td>'
            "</tr>"
            for p in report.probes
        )
        return f'{long_text(report.response)}<table class="probes">{rows}</table>'

    cards = []
    for i, j, delta in c.moved(top):
        ra, rb = c.a.reports[i], c.b.reports[j]
        cards.append(
            f'<article class="card"><h3>rows {c.a.numbers[i]}/{c.b.numbers[j]} '
            f'<span class="score {change_class(delta)}">{fmt(ra.score)} → {fmt(rb.score)} '
            f"({delta:+.4f})</span></h3>"
            f"{long_text(ra.user_input, 'q')}<table><tr><th>A</th><th>B</th></tr>"
            f"<tr><td>{probes(ra)}</td><td>{probes(rb)}</td></tr></table></article>"
        )
    lines = "".join(f"<p>{text(line)}</p>" for line in _lines(c, margin, id_column, worse))
    return (
        f"{page_head('Answer relevancy: B against A')}\n"
        f"<p>A: {text(c.a.path)}<br>B: {text(c.b.path)}</p>\n"
        f"{stats_list(figures, {3: change_class(r.diff)})}\n{lines}\n"
        f'<h2>Moved most</h2>\n<div class="cards">{"".join(cards)}</div>\n</body></html>\n'
    )
