"""The HTML page: inert data, no network, distribution and worst rows first, clipped long texts,
CSS-only sorting and filtering."""

from __future__ import annotations

import math
import re

from test_writers import make_report  # one report maker for both files

from ragas_relevancy_ext.cli.output.html import (
    CLIP,
    FULL_CAP,
    histogram_svg,
    long_text,
    render_html,
    worst_rows,
)
from ragas_relevancy_ext.cli.output.html import write as write_html
from ragas_relevancy_ext.cli.stats import summarise
from ragas_relevancy_ext.scoring.report import Probe, RelevancyReport

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def page_for(*reports: RelevancyReport, meta: dict[str, str] | None = None) -> str:
    items = list(enumerate(reports, 1))
    summary = summarise([(n, r.score, r.user_input) for n, r in items])
    return render_html(items, summary, meta or {"judge": "offline", "file": HOSTILE})


def test_every_text_from_the_data_is_escaped():
    hostile = make_report(
        user_input=HOSTILE,
        response=HOSTILE,
        probes=[Probe(HOSTILE, 0, 0.7)],
        notes=[HOSTILE],
        distinct_probes=1,
    )
    failed = make_report(math.nan, probes=[], error=HOSTILE, user_input="ok?", response="ok.")
    page = page_for(hostile, failed)
    assert "<script" not in page
    assert "<img" not in page
    assert "onerror=alert(1)>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page


def test_page_loads_nothing_from_the_network(tmp_path):
    path = tmp_path / "report.html"
    items = [(1, make_report()), (2, make_report(0.0, all_noncommittal=True))]
    summary = summarise([(n, r.score, r.user_input) for n, r in items])
    write_html(path, items, summary, {"judge": "offline"})
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"<(script|link|iframe|img|object|embed)\b", page)
    assert not re.search(r"\bsrc\s*=", page)
    links = re.findall(r'\bhref\s*=\s*"([^"]*)"', page)
    assert links and all(re.fullmatch(r"#row-\d+", link) for link in links)  # in-page only
    assert len(re.findall(r"\bhref\s*=", page)) == len(links)
    assert "@import" not in page and "url(" not in page and "@font-face" not in page
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"]  # a namespace


def test_page_shows_summary_probes_bars_and_flags():
    page = page_for(make_report(0.75), make_report(0.0, all_noncommittal=True))
    assert "When did A17 ship?" in page and "What shipped?" in page
    assert 'style="width:90.0%"' in page and 'style="width:60.0%"' in page
    assert "noncommittal" in page and "all noncommittal" in page
    assert "<li><b>0.3750</b><span>mean</span></li>" in page
    assert len(re.findall(r'<article class="card[ "]', page)) == 2


def test_distribution_and_worst_rows_come_before_the_cards():
    page = page_for(make_report(0.75), make_report(math.nan, probes=[], error="boom"))
    headings = re.findall(r"<h2>([^<]*)</h2>", page)
    assert headings == ["Distribution", "Worst 2 rows", "All rows (2)"]
    assert page.index('class="hist"') < page.index('class="worst"') < page.index("<article")


def test_worst_rows_name_the_probe_that_pulled_each_down():
    drifted = make_report(
        0.55, probes=[Probe("Where is A17?", 0, 0.9), Probe("Do you sell cats?", 0, 0.2)]
    )
    nan = make_report(math.nan, probes=[], error="TimeoutError: judge")
    zero = make_report(0.0, all_noncommittal=True, probes=[Probe("Huh?", 1, 0.3)])
    far = make_report(0.2, probes=[Probe("A?", 0, 0.21), Probe("B?", 0, 0.19)])
    fine = make_report(0.9, probes=[Probe("A17?", 0, 0.9), Probe("Order A17?", 0, 0.9)])
    page = page_for(fine, drifted, nan, zero, far)
    rows = re.findall(r'<td class="why">([^<]*)</td>', page)
    assert rows == [
        "not scored: TimeoutError: judge",
        "every probe flagged noncommittal",
        "every probe far from the question",
        "“Do you sell cats?” (0.20) pulled it down by 0.35",
        "no probe stands out",
    ]
    # and in the card, the probe itself carries how much it pulled
    assert '<span class="flag pull">pulled the score down by 0.35</span>' in page


def test_worst_rows_count_the_ties_left_out():
    items = [(n, make_report(0.0, all_noncommittal=True)) for n in range(1, 14)]
    shown, tied = worst_rows(items, 10)
    assert [n for n, _ in shown] == list(range(1, 11)) and tied == 3
    page = page_for(*(r for _, r in items))
    assert "3 more row(s) tied with the last one are not listed." in page


def test_rows_sort_and_filter_without_a_script():
    reports = [
        make_report(0.8),
        make_report(math.nan, probes=[], error="boom"),
        make_report(0.0, all_noncommittal=True),
        make_report(0.3, probes=[Probe("Far?", 0, 0.3)]),
    ]
    page = page_for(*reports)
    cards = re.findall(
        r'<article class="([^"]*)" id="row-(\d+)" style="--up:(\d+);--down:(\d+)"', page
    )
    assert cards == [
        ("card nc", "1", "3", "0"),  # the second probe of make_report is noncommittal
        ("card nan", "2", "0", "3"),
        ("card zero low nc", "3", "1", "2"),
        ("card low", "4", "2", "1"),
    ]
    for label in ("all (4)", "NaN (1)", "0 (1)", "noncommittal (2)", "below 0.5 (2)"):
        assert f">{label}</label>" in page
    assert "#show-nan:checked~.cards .card:not(.nan){display:none}" in page
    assert "#sort-up:checked~.cards .card{order:var(--up)}" in page
    assert page.count('type="radio"') == 8 and page.count(" checked>") == 2


def test_a_1_mb_response_makes_a_small_page_with_the_text_clipped():
    huge = "All about refunds. " + "x" * 1_000_000
    report = make_report(
        response=huge,
        probes=[Probe(huge + "?", 0, 0.5), Probe(huge + "!?", 0, 0.4), Probe(huge, 0, 0.45)],
        distinct_probes=3,
        notes=[huge],
    )
    page = page_for(report)
    assert len(page.encode("utf-8")) < 100_000
    assert huge[:CLIP] in page and huge[: FULL_CAP + 1] not in page
    assert f"show more (first {FULL_CAP:,} of {len(huge):,} characters)" in page


def test_long_text_shows_the_start_and_keeps_the_rest_collapsed():
    short = "Short answer."
    assert long_text(short) == '<div class="text" dir="auto">Short answer.</div>'
    text = "word " * 200  # 1,000 characters
    html = long_text(text)
    assert html.startswith(f'<div class="text" dir="auto">{text[:CLIP]}…<details><summary>')
    assert "show the full text (1,000 characters)" in html and "<details open" not in html


def test_bidi_controls_are_shown_as_codes_not_obeyed():
    tricky = "Refund\u202e321 si latot ruoy\u202c and \u2066isolated\u2069"
    page = page_for(make_report(user_input=tricky, response=tricky, probes=[Probe(tricky, 0, 0.7)]))
    assert not re.search("[\u202a-\u202e\u2066-\u2069]", page)
    assert "Refund&lt;U+202E&gt;321 si latot ruoy&lt;U+202C&gt;" in page


def test_an_offline_run_says_so_at_the_top():
    caution = "the offline judge makes each probe from the answer's first sentence"
    page = page_for(make_report(), meta={"judge": "offline", "caution": caution})
    assert page.index("Caution:") < page.index("<h2>Distribution")
    assert "the offline judge makes each probe from the answer&#x27;s first sentence" in page


def test_histogram_counts_scores_by_tenth_and_nan_apart():
    svg = histogram_svg([0.05, 0.95, 1.0, 0.55, -0.2, math.nan])
    titles = dict(re.findall(r"<title>([\d.]+-[\d.]+): (\d+)</title>", svg))
    assert titles["0.0-0.1"] == "2"  # 0.05 and the negative score
    assert titles["0.9-1.0"] == "2"  # 0.95 and exactly 1.0
    assert titles["0.5-0.6"] == "1"
    assert "<title>not scored (NaN): 1</title>" in svg
    assert "not scored (NaN): 1" in svg


def test_the_nan_figure_names_its_causes():
    causes = {1: "scored", 2: "TimeoutError", 3: "no usable probe", 4: "TimeoutError"}
    items = [(1, make_report(0.8))] + [
        (n, make_report(math.nan, probes=[], error="x")) for n in (2, 3, 4)
    ]
    summary = summarise([(n, r.score, r.user_input) for n, r in items], causes=causes)
    page = render_html(items, summary, {})
    assert "<li><b>3</b><span>NaN: TimeoutError 2, no usable probe 1</span></li>" in page
    assert "<li><b>0</b><span>NaN, not scored</span></li>" in page_for(make_report(0.8))


def test_on_a_phone_the_probe_table_s_long_header_wraps_and_the_bar_column_goes():
    page = page_for(make_report())
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1).replace("\n", "")
    rules = re.findall(r"([^{}]+)\{([^{}]*)\}", style)
    assert (".probes th:first-child", "white-space:normal") in rules  # not nowrap as every th
    phone = style.split("@media (max-width:600px){", 1)[1]
    assert ".probes td:nth-child(2),.probes th:nth-child(2){display:none}" in phone
    assert '<table class="probes"><tr><th>probe (a question' in page  # the cells the rules pick
