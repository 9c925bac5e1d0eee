"""The HTML page: inert data, no network, distribution and worst rows first, clipped long texts,
CSS-only sorting and filtering."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

from test_diff import invoke as invoke_diff
from test_diff import write as write_run
from test_writers import make_report  # one report maker for both files

from ragas_relevancy_ext.cli.output.console import OFFLINE_CAUTION
from ragas_relevancy_ext.cli.output.html import (
    CLIP,
    FULL_CAP,
    histogram_svg,
    long_text,
    render_html,
    worst_rows,
)
from ragas_relevancy_ext.cli.output.html import write as write_html
from ragas_relevancy_ext.cli.stats import summarise, summarise_cost
from ragas_relevancy_ext.scoring.report import Probe, RelevancyReport
from ragas_relevancy_ext.scoring.usage import Usage

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
    assert '<span class="flag down">pulled the score down by 0.35</span>' in page


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
    rules = css_rules(page)
    assert (".probes th:first-child", "white-space:normal") in rules  # not nowrap as every th
    hidden = hidden_on_a_phone(page)
    assert ".bars" in hidden and page.count('<td class="bars"><div class="bar">') == 2
    for text in ("When did A17 ship?", "What shipped?"):  # the probes stay, their bars go
        cells = [c for c in classes_around(page, text) if "probes" in c]
        assert cells and not [s for c in cells for s in hidden if hides(s, c)]


def css_rules(page: str) -> list[tuple[str, str]]:
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1).replace("\n", "")
    return re.findall(r"([^{}]+)\{([^{}]*)\}", style)


def hidden_on_a_phone(page: str) -> list[str]:
    """The selectors the page hides at 390 px (its max-width:600px block)."""
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1).replace("\n", "")
    phone, depth = style.split("@media (max-width:600px){", 1)[1], 1
    for end, char in enumerate(phone):  # up to the block's own closing brace
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth == 0:
            phone = phone[:end]
            break
    found = re.findall(r"([^{}]+)\{[^{}]*display:none", phone)
    return [selector.strip() for group in found for selector in group.split(",")]


def hides(selector: str, classes: set[str]) -> bool:
    """Whether ``selector`` (class names only: ``.a .b``) picks an element whose classes and
    its ancestors' are ``classes``; a selector that counts columns by position is refused."""
    assert re.fullmatch(r"(\.[\w-]+\s*)+", selector), f"not by class: {selector}"
    return set(re.findall(r"\.([\w-]+)", selector)) <= classes


class ClassPaths(HTMLParser):
    """The classes of every element open around each piece of text (and its own)."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[tuple[str, set[str]]] = []
        self.texts: list[tuple[str, set[str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ("br", "meta", "input", "line", "rect"):
            self.open.append((tag, set((dict(attrs).get("class") or "").split())))

    def handle_endtag(self, tag: str) -> None:
        while self.open and self.open.pop()[0] != tag:
            pass

    def handle_data(self, data: str) -> None:
        self.texts.append((data, set().union(*(c for _, c in self.open))))


def classes_around(page: str, text: str) -> list[set[str]]:
    """For each place ``text`` is shown, the classes of it and the elements around it."""
    parser = ClassPaths()
    parser.feed(page)
    return [classes for data, classes in parser.texts if text in data]


def diff_page(tmp_path: Path) -> str:
    """``diff --html`` of two runs in which question 1 drops and question 2 rises."""
    rows = [(f"Question {i}?", [0.5, 0.55, 0.6], {}) for i in range(8)]
    moved = list(rows)
    moved[1] = ("Question 1?", [0.3, 0.35, 0.4], {})
    moved[2] = ("Question 2?", [0.9, 0.85, 0.95], {})
    a, b = write_run(tmp_path / "a.jsonl", rows), write_run(tmp_path / "b.jsonl", moved)
    page = tmp_path / "diff.html"
    assert invoke_diff("diff", a, b, "--html", page, "--top", "2").exit_code in (0, 1)
    return page.read_text(encoding="utf-8")


def test_on_a_phone_the_diff_page_keeps_its_probe_questions(tmp_path):
    page = diff_page(tmp_path)
    questions = ["Question 1? probe 0", "Question 2? probe 2"]  # each run's probes of the rows
    hidden = hidden_on_a_phone(page)
    assert hidden  # the narrow-screen rules the score page needs are on this page too
    for question in questions:
        cells = [c for c in classes_around(page, question) if "probes" in c]
        assert cells  # a question cell of a probe table
        assert not [s for c in cells for s in hidden if hides(s, c)], question


def test_a_drop_is_red_and_a_rise_green_on_both_pages(tmp_path):
    def colour(css_class: str, page: str) -> tuple[int, int, int]:
        (rule,) = [body for selector, body in css_rules(page) if selector == f".{css_class}"]
        hex_ = re.search(r"background:#([0-9a-f]{6})", rule).group(1)
        return int(hex_[0:2], 16), int(hex_[2:4], 16), int(hex_[4:6], 16)

    page = diff_page(tmp_path)
    chips = dict(re.findall(r'<span class="score ([a-z]*)">[^<]*\(([+-])\d', page))
    assert chips == {"down": "-", "up": "+"}  # the drop 0.5500 -> 0.3500 and the rise
    tile = re.search(r'<li><b class="([a-z]+)">[^<]*</b><span>B - A', page)
    red, green, _ = colour("down", page)
    assert red > green  # a drop is red
    red, green, _ = colour("up", page)
    assert green > red  # a rise is green
    assert tile is not None and tile.group(1) == "up"  # B's mean is higher: its tile is green
    score_page = page_for(make_report(0.3, probes=[Probe("Q?", 0, 0.9), Probe("R?", 0, 0.1)]))
    assert re.search(r'<span class="flag down">pulled the score down by', score_page)
    red, green, _ = colour("down", score_page)
    assert red > green


def test_tiles_keep_each_figure_whole_and_the_page_names_no_command_line_option(tmp_path):
    items = [(1, make_report(usage=Usage(1, 800, 50, 2, 30))), (2, make_report(0.4))]
    summary = summarise([(n, r.score, r.user_input) for n, r in items])
    summary = replace(summary, cost=summarise_cost([r.usage for _, r in items]))
    page = render_html(items, summary, {"judge": "offline", "caution": OFFLINE_CAUTION})
    tiles = [body.split(";") for selector, body in css_rules(page) if selector == ".stats b"]
    assert tiles and all("white-space:normal" not in body for body in tiles)
    assert any("white-space:nowrap" in body for body in tiles)
    assert "What it cost" in page and "no price per million tokens was given" in page
    for shown in (page, diff_page(tmp_path)):  # no option to give: a reader runs no command
        parser = ClassPaths()
        parser.feed(re.sub(r"<style>.*?</style>", "", shown, flags=re.S))
        assert not re.findall(r"(?<![\w-])--[a-z]", " ".join(data for data, _ in parser.texts))
