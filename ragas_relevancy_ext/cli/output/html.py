"""One self-contained HTML page for a run: the distribution and the worst rows first, then a
card per row, sorted and filtered by CSS alone (page.css: radio buttons and flex ``order``); no
script, nothing loaded. Every text from the data is escaped, its bidi controls shown as codes.
:func:`write` replaces only a page carrying :data:`GENERATOR`, and always whole."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from html import escape
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from ...scoring.report import (
    LOW_SCORE,
    RelevancyReport,
    clip,
    fmt,
    language_tag,
    neutralise_controls,
    pull_downs,
    weak_point,
)
from . import Item
from .console import OFFLINE_CAUTION
from .files import check_target, write_atomically

if TYPE_CHECKING:
    from ..stats import Summary

BINS = 10
CLIP = 500  # characters of a long text shown at once
FULL_CAP = 5_000  # characters of a long text behind "show the full text"
WORST = 10  # rows in the "worst rows" table
TITLE = "Answer relevancy report"
# The mark of a page this tool wrote, near the top of its head.
GENERATOR = '<meta name="generator" content="ragas-relevancy-ext">'

# (card class, label) of each filter button; page.css hides the other cards when one is checked
FILTERS = (
    ("all", "all"),
    ("nan", "NaN"),
    ("zero", "0"),
    ("nc", "noncommittal"),
    ("low", f"below {LOW_SCORE}"),
)
SORTS = (("row", "row order"), ("up", "score, lowest first"), ("down", "score, highest first"))

# the style of every page (the page writes it on a line of its own, after "<style>")
CSS = "\n" + resources.files(__package__).joinpath("page.css").read_text(encoding="utf-8")


def write(
    path: str | Path, items: Sequence[Item], summary: Summary, meta: Mapping[str, str]
) -> None:
    """Write the page for ``items`` to ``path`` (folders made, a link's target written); an
    existing file that is not a page of ours is refused as is."""
    target = check_target(path, "--html", is_ours, "a page")
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(target, render_html(items, summary, meta).encode("utf-8"))


def is_ours(path: str | Path) -> bool:
    """Whether ``path`` is a page this tool wrote (:data:`GENERATOR` in its head) or empty."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(1024)
    except OSError:
        return False
    return not head or GENERATOR.encode() in head


def render_html(items: Sequence[Item], summary: Summary, meta: Mapping[str, str]) -> str:
    """The page as a string."""
    caution = meta.get("caution")
    if caution == OFFLINE_CAUTION:  # the terminal's words name an option; a reader runs none
        caution = (
            "these scores come from the offline judge, which makes each probe from the answer's "
            "first sentence: they show how the metric works, not how good the answers are"
        )
    used = "".join(
        f"<tr><th>{text(k)}</th><td>{text(v)}</td></tr>" for k, v in meta.items() if k != "caution"
    )
    used = f'<table class="meta">{used}</table>'  # what the run used, the caution aside
    kinds = Counter(kind for _, report in items for kind in _kinds(report))
    parts = [
        page_head(TITLE),
        f'<p class="caution"><b>Caution:</b> {text(caution)}</p>' if caution else "",
        _stats(kinds, summary),
        _cost(summary),
        "<h2>Distribution</h2>",
        f'<div class="panel">{histogram_svg([r.score for _, r in items])}</div>',
        _worst_table(items),
        f"<details><summary>What this run used</summary>{used}</details>",
        f"<h2>All rows ({len(items)})</h2>",
        _controls(kinds, len(items)),
        '<div class="cards">',
        *(
            _card(number, report, ranks)
            for (number, report), ranks in zip(items, _ranks(items), strict=True)
        ),
        "</div></body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"


def page_head(title: str) -> str:
    """A page's start: its head (with :data:`GENERATOR` and the style), then its heading."""
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            GENERATOR,
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{text(title)}</title><style>{CSS}</style></head><body>",
            f"<h1>{text(title)}</h1>",
        ]
    )


def text(value: object) -> str:
    """Data as inert text: bidi controls shown as codes, then HTML-escaped."""
    return escape(neutralise_controls(str(value)))


def stats_list(figures: Sequence[tuple[str, str]], marks: Mapping[int, str] | None = None) -> str:
    """(figure, what it is) pairs as a row of tiles; ``marks``: a class for some figures."""
    marked = {i: f' class="{css}"' for i, css in (marks or {}).items() if css}
    tiles = "".join(
        f"<li><b{marked.get(i, '')}>{text(v)}</b><span>{text(k)}</span></li>"
        for i, (v, k) in enumerate(figures)
    )
    return f'<ul class="stats">{tiles}</ul>'


def change_class(delta: float) -> str:
    """The colour of a change: ``down`` (red) for a drop, ``up`` (green) for a rise."""
    return "down" if delta < 0 else "up" if delta > 0 else ""


def long_text(text: str, css_class: str = "text") -> str:
    """``text`` clipped to :data:`CLIP` characters, the rest (up to :data:`FULL_CAP`) collapsed."""
    shown = neutralise_controls(text)
    if len(shown) <= CLIP:
        return f'<div class="{css_class}" dir="auto">{escape(shown)}</div>'
    label = f"show the full text ({len(shown):,} characters)"
    if len(shown) > FULL_CAP:
        label = f"show more (first {FULL_CAP:,} of {len(shown):,} characters)"
    return (
        f'<div class="{css_class}" dir="auto">{escape(shown[:CLIP])}…'
        f"<details><summary>{label}</summary>"
        f'<div class="full">{escape(shown[:FULL_CAP])}</div></details></div>'
    )


def _kinds(report: RelevancyReport) -> list[str]:
    """The filter classes a row belongs to: nan, zero, nc, low."""
    score, finite = report.score, _finite(report.score)
    kinds = {"nan": not finite, "zero": finite and score == 0, "low": finite and score < LOW_SCORE}
    kinds["nc"] = any(p.noncommittal for p in report.probes)
    return [kind for kind, belongs in kinds.items() if belongs]


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _stats(kinds: Counter[str], summary: Summary) -> str:
    causes = summary.causes_text()  # NaN: TimeoutError 1, ...
    figures = [
        (str(summary.n), "rows"),
        (str(summary.scored), "scored"),
        (fmt(summary.mean), "mean"),
        (fmt(summary.median), "median"),
        (str(kinds["low"]), f"below {LOW_SCORE}"),
        (str(summary.zeros), "score 0"),
        (str(summary.nans), f"NaN: {causes}" if causes else "NaN, not scored"),
        (str(kinds["nc"]), "noncommittal"),
    ]
    bars = summary.error_bars
    if bars is not None:
        figures[2:3] = [
            (f"{fmt(bars.mean)} ± {fmt(bars.stderr)}", "mean ± standard error"),
            (f"[{fmt(bars.ci_low)}, {fmt(bars.ci_high)}]", f"{bars.level:.0%} CI ({bars.method})"),
        ]
    split = f'<p class="note">{text(bars.variance_text())}</p>' if bars is not None else ""
    return stats_list(figures) + split


def _cost(summary: Summary) -> str:
    """What the run cost: totals, per-row means and USD, as the summary's lines say it."""
    lines = summary.cost.lines(flags=False) if summary.cost is not None else []
    items = "".join(f"<li>{text(line)}</li>" for line in lines)
    return f'<h2>What it cost</h2><ul class="cost">{items}</ul>' if items else ""


def histogram_svg(scores: Sequence[float]) -> str:
    """Inline SVG bars counting scores in :data:`BINS` equal bins over [0, 1], then a NaN bar."""
    finite = [s for s in scores if _finite(s)]
    counts = Counter(min(BINS - 1, max(0, int(score * BINS))) for score in finite)
    nans = len(scores) - len(finite)
    bar, pad, height, base = 36, 24, 170, 146  # base: the bars' foot, a pad above the bottom
    nan_x = pad + BINS * bar + 12
    width, top = nan_x + bar + pad, max([*counts.values(), nans, 1])
    bars = [
        (pad + i * bar, counts[i], _bin_colour(i / BINS), f"{i / BINS:.1f}-{(i + 1) / BINS:.1f}")
        for i in range(BINS)
    ]
    shapes = []
    for x, count, colour, title in [*bars, (nan_x, nans, "#9aa3ab", "not scored (NaN)")]:
        h, middle = (base - 34) * count / top, x + bar / 2  # 34: room for the count above
        shapes.append(
            f'<rect x="{x + 2}" y="{base - h:.1f}" width="{bar - 4}" height="{h:.1f}" '
            f'fill="{colour}"><title>{title}: {count}</title></rect>'
            + (f'<text x="{middle}" y="{base - h - 3:.1f}">{count}</text>' if count else "")
        )
    ticks = [(pad + i * bar, f"{i / BINS:.1f}") for i in range(0, BINS + 1, 2)]
    shapes += [
        f'<text x="{x}" y="{height - 6}">{t}</text>' for x, t in [*ticks, (nan_x + 18, "NaN")]
    ]
    shapes.append(f'<line x1="{pad}" y1="{base}" x2="{nan_x - 12}" y2="{base}" stroke="#9aa3ab"/>')
    if finite:
        mean = sum(finite) / len(finite)
        at = pad + min(1.0, max(0.0, mean)) * BINS * bar
        shapes.append(
            f'<line x1="{at:.1f}" y1="14" x2="{at:.1f}" y2="{base}" '
            f'stroke="#1d232a" stroke-dasharray="4 3"><title>mean {mean:.4f}</title></line>'
            f'<text x="{at:.1f}" y="10">mean {mean:.2f}</text>'
        )
    caption = (
        f"{len(finite)} score(s) in tenths of [0, 1] (scores below 0 count in 0.0-0.1); "
        f"not scored (NaN): {nans}"
    )
    return (
        f'<svg class="hist" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="histogram of scores">'
        f'{"".join(shapes)}</svg><p class="note">{escape(caption)}</p>'
    )


def _bin_colour(low: float) -> str:
    return "#e06c5f" if low < LOW_SCORE else "#e8b23a" if low < 0.75 else "#4caf6a"


def worst_rows(items: Sequence[Item], k: int = WORST) -> tuple[list[Item], int]:
    """The ``k`` worst rows (NaN first, then lowest score) and how many more tie with the last."""
    ranked = sorted(items, key=_worst_key)
    shown = ranked[:k]
    if not shown:
        return [], 0
    last = _worst_key(shown[-1])[:2]
    return shown, sum(1 for item in ranked[k:] if _worst_key(item)[:2] == last)


def _worst_key(item: Item) -> tuple[bool, float, int]:
    """Sorts (row number, report) pairs worst first: NaN, then by score, ties by row."""
    score = item[1].score
    return (_finite(score), score if _finite(score) else 0.0, item[0])


def _worst_table(items: Sequence[Item]) -> str:
    shown, tied = worst_rows(items)
    if not shown:
        return ""
    rows = "".join(
        f'<tr><td class="num"><a href="#row-{n}">#{n}</a></td>'
        f'<td class="num"><span class="score {_score_class(r.score)}">{fmt(r.score)}</span></td>'
        f'<td>{text(clip(r.user_input, 110))}<div class="why-m">{text(weak_point(r))}</div></td>'
        f'<td class="why">{text(weak_point(r))}</td></tr>'
        for n, r in shown
    )
    more = f'<p class="note">{tied} more row(s) tied with the last one are not listed.</p>'
    more = more if tied else ""
    head = "<tr><th>row</th><th>score</th><th>question</th>"
    head += '<th class="why">what pulled it down</th></tr>'
    return (
        f"<h2>Worst {'row' if len(shown) == 1 else f'{len(shown)} rows'}</h2>"
        f'<div class="panel"><table class="worst">{head}{rows}</table>{more}</div>'
    )


def _controls(kinds: Counter[str], rows: int) -> str:
    """The sort and filter buttons (radios first: the CSS reads them as siblings)."""
    counts = {**kinds, "all": rows}
    shows = [(key, f"{label} ({counts.get(key, 0)})") for key, label in FILTERS]
    groups = (("sort", SORTS), ("show", shows))
    radios = "".join(
        f'<input class="vh" type="radio" name="{name}" id="{name}-{key}"{"" if i else " checked"}>'
        for name, buttons in groups
        for i, (key, _) in enumerate(buttons)
    )
    labels = "".join(
        f'<div><span class="muted">{name}</span>'
        + "".join(f'<label for="{name}-{key}">{escape(label)}</label>' for key, label in buttons)
        + "</div>"
        for name, buttons in groups
    )
    return f'{radios}<div class="controls">{labels}</div>'


def _ranks(items: Sequence[Item]) -> list[tuple[int, int]]:
    """Each row's place (ascending, descending) by score; NaN rows first going up, last down."""

    def best_key(item: Item) -> tuple[bool, float, int]:
        finite, score, number = _worst_key(item)
        return (not finite, -score, number)

    orders = [sorted(range(len(items)), key=lambda i: k(items[i])) for k in (_worst_key, best_key)]
    up, down = ({index: place for place, index in enumerate(order)} for order in orders)
    return [(up[i], down[i]) for i in range(len(items))]


def _flags(*flags: tuple[object, str, str]) -> str:
    """A badge for each (shown?, CSS class, text) that is shown."""
    return "".join(f'<span class="{css}">{escape(flag)}</span>' for on, css, flag in flags if on)


def _card(number: int, report: RelevancyReport, ranks: tuple[int, int]) -> str:
    cause = "" if report.cause is None else f" ({report.cause})"
    flag_html = _flags(
        (report.error or (cause and not _finite(report.score)), "flag", "not scored" + cause),
        (report.all_noncommittal, "flag", "all noncommittal"),
        (report.probes and report.distinct_probes < len(report.probes), "flag", "repeated probes"),
    )
    classes = " ".join(["card", *_kinds(report)])
    se, tip = report.score_stderr, "standard error from the probes"  # when there is one
    spread = f'<span class="muted" title="{tip}">± {se:.3f}</span>' if _finite(se) else ""
    parts = [
        f'<article class="{classes}" id="row-{number}" style="--up:{ranks[0]};--down:{ranks[1]}">',
        f'<h3><a href="#row-{number}">#{number}</a>'
        f'<span class="score {_score_class(report.score)}">{fmt(report.score)}</span>'
        f"{spread}{flag_html}</h3>",
        long_text(report.user_input, "q"),
        long_text(report.response, "text"),
        _probe_table(report),
        f'<p class="reason">{text(clip(report.reason, 1_000))}</p>',
        *(f'<div class="note">note: {text(clip(note, 500))}</div>' for note in report.notes),
        "</article>",
    ]
    return "\n".join(p for p in parts if p)


def _probe_table(report: RelevancyReport) -> str:
    if not report.probes:
        return ""
    pulls = {id(probe): pull for probe, pull in pull_downs(report)}
    rows = []
    for probe in report.probes:
        tag = language_tag(probe.language, report.question_language).strip(" []")
        pull = pulls.get(id(probe), 0.0)
        flag_html = _flags(
            (probe.noncommittal, "flag", "noncommittal"),
            (id(probe) in pulls, "flag down", f"pulled the score down by {pull:.2f}"),
            (tag, "flag", f"in {tag}"),
        )
        width = max(0.0, min(1.0, probe.cosine)) * 100 if _finite(probe.cosine) else 0.0
        rows.append(
            f"<tr><td>{long_text(probe.question, 'probe')}{flag_html}</td>"
            f'<td class="bars"><div class="bar"><span style="width:{width:.1f}%"></span></div></td>'
            f'<td class="num">{fmt(probe.cosine)}</td></tr>'
        )
    head = '<tr><th>probe (a question the judge wrote from the answer)</th><th class="bars"></th>'
    return f'<table class="probes">{head}<th>similarity</th></tr>{"".join(rows)}</table>'


def _score_class(score: float) -> str:
    if not _finite(score):
        return "nan"
    return "low" if score < LOW_SCORE else "mid" if score < 0.75 else ""
