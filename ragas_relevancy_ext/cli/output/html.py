"""One self-contained HTML page for a run: summary, score histogram and a card per sample.

No network loads (inline CSS and SVG, no scripts, no fonts). Every text that comes from the data
or the run goes through :func:`html.escape`, so a response holding ``<script>`` stays text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from ...report import DRIFT_GAP, RelevancyReport, clip, fmt

if TYPE_CHECKING:
    from ..stats import Summary

__all__ = ["histogram_svg", "render_html", "write"]

BINS = 10

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;
max-width:60rem;padding:0 1rem;color:#1d232a;background:#fafafa}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}
table{border-collapse:collapse}td,th{padding:.2rem .6rem;text-align:left;vertical-align:top}
.meta td:first-child,.sum td:first-child{color:#5b6570}
.card{background:#fff;border:1px solid #dde1e5;border-radius:6px;padding:.8rem 1rem;
margin:.8rem 0}
.card h3{margin:0 0 .4rem;font-size:1rem;display:flex;gap:.6rem;align-items:baseline}
.score{font-variant-numeric:tabular-nums;padding:.05rem .45rem;border-radius:4px;
background:#e6f4ea}
.score.low{background:#fdecea}.score.mid{background:#fff4d6}.score.nan{background:#eee}
.q{font-weight:600}.text{white-space:pre-wrap;color:#333;margin:.2rem 0 .5rem}
.reason{color:#5b6570;font-style:italic}
.probes{width:100%}.probes td{border-top:1px solid #f0f1f3}
.probes th:nth-child(2){width:12rem}.probes th:nth-child(3){width:4rem}
.num{font-variant-numeric:tabular-nums;text-align:right}
.bar{width:10rem;height:.7rem;background:#eef0f2;border-radius:3px;overflow:hidden}
.bar span{display:block;height:100%;background:#4c8bf5}
.flag{font-size:.75rem;padding:0 .35rem;border-radius:3px;margin-left:.3rem;
background:#fdecea;color:#8a1c12}
.note{font-size:.85rem;color:#8a5a00}
svg text{font:11px system-ui,sans-serif;fill:#5b6570}
"""


def write(
    path: str | Path,
    items: Sequence[tuple[int, RelevancyReport]],
    summary: Summary,
    meta: Mapping[str, str],
    title: str = "Answer relevancy report",
) -> None:
    """Write the page for ``items`` ((row number, report) pairs) to ``path`` (folders made)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(items, summary, meta, title), encoding="utf-8")


def render_html(
    items: Sequence[tuple[int, RelevancyReport]],
    summary: Summary,
    meta: Mapping[str, str],
    title: str = "Answer relevancy report",
) -> str:
    """The page as a string."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        _meta_table(meta),
        "<h2>Summary</h2>",
        _summary_table(summary),
        "<h2>Scores</h2>",
        histogram_svg([r.score for _, r in items]),
        f"<h2>Samples ({len(items)})</h2>",
        *(_card(number, report) for number, report in items),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _meta_table(meta: Mapping[str, str]) -> str:
    rows = "".join(
        f"<tr><td>{escape(k)}</td><td>{escape(str(v))}</td></tr>" for k, v in meta.items()
    )
    return f'<table class="meta">{rows}</table>'


def _summary_table(summary: Summary) -> str:
    rows = [
        ("samples", str(summary.n)),
        ("scored", str(summary.scored)),
        ("mean", fmt(summary.mean)),
        ("median", fmt(summary.median)),
        ("score 0", str(summary.zeros)),
        ("NaN (not scored)", summary.nans_text()),
    ]
    body = "".join(f"<tr><td>{escape(k)}</td><td>{escape(v)}</td></tr>" for k, v in rows)
    lows = "".join(
        f"<tr><td>#{low.number}</td><td class=num>{fmt(low.score)}</td>"
        f"<td>{escape(clip(low.user_input, 100))}</td></tr>"
        for low in summary.lowest
    )
    lowest = f"<h2>Lowest {len(summary.lowest)}</h2><table>{lows}</table>" if lows else ""
    return f'<table class="sum">{body}</table>{lowest}'


def histogram_svg(scores: Sequence[float], bins: int = BINS) -> str:
    """Inline SVG bars counting scores in ``bins`` equal bins over [0, 1] (NaN counted apart)."""
    finite = [s for s in scores if s is not None and math.isfinite(s)]
    counts = [0] * bins
    for score in finite:
        counts[min(bins - 1, max(0, int(score * bins)))] += 1
    nans = len(scores) - len(finite)
    width, height, pad, bar = 420, 150, 24, 36
    top = max(counts, default=0) or 1
    shapes = []
    for i, count in enumerate(counts):
        h = (height - 2 * pad) * count / top
        x = pad + i * bar
        y = height - pad - h
        shapes.append(
            f'<rect x="{x + 2}" y="{y:.1f}" width="{bar - 4}" height="{h:.1f}" fill="#4c8bf5">'
            f"<title>{i / bins:.1f}-{(i + 1) / bins:.1f}: {count}</title></rect>"
        )
        if count:
            shapes.append(
                f'<text x="{x + bar / 2}" y="{y - 3:.1f}" text-anchor="middle">{count}</text>'
            )
    for i in range(0, bins + 1, 2):
        x = pad + i * bar
        shapes.append(f'<text x="{x}" y="{height - 6}" text-anchor="middle">{i / bins:.1f}</text>')
    shapes.append(
        f'<line x1="{pad}" y1="{height - pad}" x2="{pad + bins * bar}" y2="{height - pad}" '
        'stroke="#9aa3ab"/>'
    )
    caption = f"{len(finite)} score(s); not scored (NaN): {nans}; scores below 0 count in 0.0-0.1"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="histogram of scores">{"".join(shapes)}</svg>'
        f"<p class=note>{escape(caption)}</p>"
    )


def _card(number: int, report: RelevancyReport) -> str:
    score_class = _score_class(report.score)
    flags = []
    if report.error:
        flags.append("not scored")
    if report.all_noncommittal:
        flags.append("all noncommittal")
    if report.probes and report.distinct_probes < len(report.probes):
        flags.append("repeated probes")
    flag_html = "".join(f"<span class=flag>{escape(f)}</span>" for f in flags)
    parts = [
        f'<div class="card" id="row-{number}">',
        f'<h3><span>#{number}</span><span class="score {score_class}">{fmt(report.score)}</span>'
        f"{flag_html}</h3>",
        f"<div class=q>{escape(report.user_input)}</div>",
        f"<div class=text>{escape(report.response)}</div>",
        _probe_table(report),
        f"<p class=reason>{escape(report.reason)}</p>",
        *(f"<div class=note>note: {escape(note)}</div>" for note in report.notes),
        "</div>",
    ]
    return "\n".join(p for p in parts if p)


def _probe_table(report: RelevancyReport) -> str:
    if not report.probes:
        return ""
    best = max(p.cosine for p in report.probes)
    rows = []
    for probe in report.probes:
        flags = []
        if probe.noncommittal:
            flags.append("noncommittal")
        if probe.cosine < best - DRIFT_GAP:
            flags.append("drifted")
        width = max(0.0, min(1.0, probe.cosine)) * 100 if math.isfinite(probe.cosine) else 0.0
        flag_html = "".join(f"<span class=flag>{escape(f)}</span>" for f in flags)
        rows.append(
            f"<tr><td>{escape(probe.question)}{flag_html}</td>"
            f'<td><div class=bar><span style="width:{width:.1f}%"></span></div></td>'
            f"<td class=num>{fmt(probe.cosine)}</td></tr>"
        )
    head = "<tr><th>probe</th><th>cosine with question</th><th></th></tr>"
    return f"<table class=probes>{head}{''.join(rows)}</table>"


def _score_class(score: float) -> str:
    if score is None or not math.isfinite(score):
        return "nan"
    return "low" if score < 0.5 else "mid" if score < 0.75 else ""
