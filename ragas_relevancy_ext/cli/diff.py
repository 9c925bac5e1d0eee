"""``ragas-relevancy diff A.jsonl B.jsonl``: is the change between two runs real?

Rows pair by question (``user_input``, whitespace runs made one, and ``--id COLUMN``), never by
response: a question asked twice pairs its first rows, then its second. Two verdicts, each able
to exit 1: the scores (B - A over the pairs both scored, its 95% interval wholly below
``-margin``) and the failures (B failing, NaN, on significantly more pairs than A). Runs scored
with other settings, or that share few questions, are compared with a warning. No RAGAS, no
judge, no network.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from ..scoring.report import RelevancyReport, clip, fmt, json_safe, neutralise_controls
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
SMALL_OVERLAP = 0.5  # under this share of either run's rows paired, the verdict covers few rows


@dataclass(frozen=True)
class Comparison:
    """Two saved runs paired by question: the paired difference of their scores and failures,
    the settings they were scored with where these differ, and each whole run's mean."""

    a: SavedRun
    b: SavedRun
    pairs: list[tuple[int, int]]
    only_a: int
    only_b: int
    repeated: int
    result: PairedDifference
    settings_differ: dict[str, tuple[str, str]]
    run_means: tuple[float, float]  # every scored row of A, of B

    def moved(self, top: int) -> list[tuple[int, int, float]]:
        """The ``top`` pairs (index in A, index in B, B - A) whose score moved most."""
        deltas = [(i, j, self.b.reports[j].score - self.a.reports[i].score) for i, j in self.pairs]
        finite = [d for d in deltas if math.isfinite(d[2])]
        return sorted(finite, key=lambda d: (-abs(d[2]), d[0]))[:top]

    @property
    def small_overlap(self) -> bool:
        """Whether under half of either run's rows are paired."""
        n = len(self.pairs)
        return n < SMALL_OVERLAP * len(self.a.reports) or n < SMALL_OVERLAP * len(self.b.reports)

    def regressed(self, margin: float) -> bool:
        """Exit 1: B's scores significantly lower by more than ``margin``, or its failures
        significantly more frequent."""
        return self.result.worse_by_more_than(margin) or self.result.failures_rose()

    def other_settings(self) -> str:
        """``A and B were scored with other settings (strictness 3 vs 1)``."""
        which = "; ".join(f"{k} {a} vs {b}" for k, (a, b) in self.settings_differ.items())
        return f"A and B were scored with other settings ({clip(which, 300)})"

    def warnings(self) -> list[str]:
        """One line per reason the difference may not mean what it seems."""
        lines = []
        if self.settings_differ:
            lines.append(
                f"warning: {self.other_settings()}: the difference mixes their effect with the "
                "change"
            )
        if self.small_overlap:
            r, (all_a, all_b) = self.result, self.run_means
            lines.append(
                f"warning: only {len(self.pairs)} of A's {len(self.a.reports)} rows and of B's "
                f"{len(self.b.reports)} pair: whole runs mean A {fmt(all_a)}, B {fmt(all_b)}; "
                f"the paired rows A {fmt(r.mean_a)}, B {fmt(r.mean_b)}"
            )
        return lines


def compare_runs(
    a: SavedRun,
    b: SavedRun,
    id_column: str | None = None,
    cluster: str | None = None,
    failed_as_zero: bool = False,
) -> Comparison:
    """Pair ``a`` and ``b`` by question (and ``id_column``) and take the paired difference; a
    :class:`UsageError` when no question pairs, or fewer than 2 pairs are scored in both and
    the failures did not rise."""
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
    result = paired_difference(
        [a.reports[i].score for i in in_a], scores_b, clusters=labels, failed_as_zero=failed_as_zero
    )
    if result.n_pairs < 2 and not result.failures_rose():
        raise UsageError(
            f"{result.n_pairs} pair(s) scored in both runs: at least 2 are needed for an interval"
        )
    differ = {k: (v, b.settings[k]) for k, v in a.settings.items() if b.settings.get(k, v) != v}
    means = (_mean(a.reports, failed_as_zero), _mean(b.reports, failed_as_zero))
    only = (len(pairing.only_a), len(pairing.only_b))
    return Comparison(a, b, pairing.pairs, *only, pairing.repeated, result, differ, means)


def _mean(reports: list[RelevancyReport], failed_as_zero: bool) -> float:
    scores = [0.0 if failed_as_zero and math.isnan(r.score) else r.score for r in reports]
    finite = [s for s in scores if math.isfinite(s)]
    return sum(finite) / len(finite) if finite else math.nan


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
    failed_as_zero: Annotated[
        bool,
        typer.Option(
            "--failed-as-zero",
            help="Score a failed (NaN) row 0, so failures count in the mean difference too.",
        ),
    ] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict", help="Refuse (exit 2) runs scored with other judge, embeddings or settings."
        ),
    ] = False,
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

    Rows pair by question; the mean difference B - A gets a 95% interval (Student's t) and a
    p-value, and the rows failed (NaN) in one run only an exact McNemar test.

    Exit codes: 0 no significant drop, 1 B significantly lower than A by more than --margin
    (the interval wholly below -M: one-sided at 2.5%) or failing significantly more often
    (one-sided at 0.25%), 2 bad input (or, with --strict, runs scored with other settings).
    """
    if html is not None:
        html = check_outputs({"html": html}, input_path=a)["html"]
        if same_file(html, b):
            raise OutputPathError(f"--html {html} is the input file; give --html a file of its own")
    comparison = compare_runs(SavedRun.read(a), SavedRun.read(b), id_, cluster, failed_as_zero)
    if strict and comparison.settings_differ:
        raise UsageError(f"{comparison.other_settings()}: --strict refuses to compare them")
    worse = comparison.regressed(margin)
    if json_:
        for line in comparison.warnings():
            make_console(stderr=True).print(Text(neutralise_controls(line, one_line=True)))
        print(json.dumps(json_safe(_summary(comparison, margin, id_)), allow_nan=False))
    else:
        _print(comparison, margin, id_, top)
    if html is not None:
        html.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(html, _page(comparison, margin, id_, top).encode("utf-8"))
        if not json_:
            make_console().print(f"wrote {html}", soft_wrap=True)
    return EXIT_FAILED if worse else EXIT_OK


def _paired_by(id_column: str | None) -> str:
    return "question text" + (f" and input column {id_column!r}" if id_column else "")


def _summary(c: Comparison, margin: float, id_column: str | None) -> dict[str, Any]:
    r = c.result
    return {
        **asdict(r),
        "drop_p_value": r.drop_p_value(margin),
        "only_in_a": c.only_a,
        "only_in_b": c.only_b,
        "repeated_questions": c.repeated,
        "paired_by": _paired_by(id_column),
        "margin": margin,
        "significant_drop": r.worse_by_more_than(margin),
        "failures_rose": r.failures_rose(),
        "exit_1": c.regressed(margin),
        "settings_differ": {k: list(v) for k, v in c.settings_differ.items()},
        "small_overlap": c.small_overlap,
        "run_mean_a": c.run_means[0],
        "run_mean_b": c.run_means[1],
    }


def lines(c: Comparison, margin: float, id_column: str | None = None) -> list[str]:
    """The comparison in words: what paired, the failures, the scores, the two verdicts (each
    saying its test and side), and the warnings."""
    from ..error_bars import FAILURE_ALPHA, interval_text, method_text, p_text, rough_text

    r = c.result
    by = f" by more than {margin:g}" if margin else ""
    half = f"{(1 - r.level) / 2:.3g}"
    failures = (
        f"failed (NaN) in the pairs: only in A {r.failed_only_a}, only in B {r.failed_only_b}, "
        f"in both {r.failed_both}"
    )
    mcnemar = f"exact McNemar, one-sided {p_text(r.failure_p_value)}; exit 1 under {FAILURE_ALPHA}"
    drop = f"one-sided {p_text(r.drop_p_value(margin))}; exit 1 under {half}"
    out = [
        f"paired by {_paired_by(id_column)}: {len(c.pairs)} pair(s), {r.n_pairs} scored in "
        f"both; only in A {c.only_a}, only in B {c.only_b}",
        failures,
        f"mean A {fmt(r.mean_a)} | mean B {fmt(r.mean_b)} | B - A {fmt(r.diff)} ± "
        f"{fmt(r.stderr)} ({r.level:.0%} CI {interval_text(r.ci_low, r.ci_high)}, "
        f"{method_text(r.method, r.clusters, r.df)}{rough_text(r.clusters)}) | "
        f"{p_text(r.p_value)} (two-sided) | correlation of paired scores {fmt(r.correlation, 2)}",
        f"scores: B is significantly lower than A{by} ({drop}): exit 1"
        if r.worse_by_more_than(margin)
        else f"scores: no significant drop{by} ({drop})",
        f"failures: B fails significantly more often than A ({mcnemar}): exit 1"
        if r.failures_rose()
        else f"failures: no significant rise ({mcnemar})",
    ]
    if c.repeated:
        out.append(
            f"{c.repeated} question(s) appear more than once in a file: their rows pair in row "
            "order; --id COLUMN pairs them by an id"
        )
    return out + c.warnings()


def _print(c: Comparison, margin: float, id_column: str | None, top: int) -> None:
    console = make_console()
    runs = {"A": c.a, "B": c.b}
    print_header(console, {k: f"{run.path} ({len(run.reports)} rows)" for k, run in runs.items()})
    for line in lines(c, margin, id_column):
        exit_1 = line.endswith(": exit 1")
        style = "red" if exit_1 else "yellow" if line.startswith("warning") else ""
        print_lines(console, neutralise_controls(line, one_line=True), style=style)
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


def _page(c: Comparison, margin: float, id_column: str | None, top: int) -> str:
    """A self-contained page in the style of the run pages (:mod:`.output.html`)."""
    from ..error_bars import interval_text, p_text
    from .output.html import change_class, long_text, page_head, stats_list, text

    r = c.result
    figures = [
        (str(r.n_pairs), "pairs"),
        (fmt(r.mean_a), "mean A"),
        (fmt(r.mean_b), "mean B"),
        (f"{fmt(r.diff)} ± {fmt(r.stderr)}", "B - A ± standard error"),
        (interval_text(r.ci_low, r.ci_high), f"{r.level:.0%} CI ({r.method})"),
        (p_text(r.p_value), "two-sided"),
        (f"{r.failed_only_a} / {r.failed_only_b}", "failed only in A / only in B"),
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
    said = "".join(f"<p>{text(line)}</p>" for line in lines(c, margin, id_column))
    return (
        f"{page_head('Answer relevancy: B against A')}\n"
        f"<p>A: {text(c.a.path)}<br>B: {text(c.b.path)}</p>\n"
        f"{stats_list(figures, {3: change_class(r.diff)})}\n{said}\n"
        f'<h2>Moved most</h2>\n<div class="cards">{"".join(cards)}</div>\n</body></html>\n'
    )
