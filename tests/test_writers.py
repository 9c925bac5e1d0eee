"""The JSONL report (written line by line, resumable) and the self-contained HTML page."""

from __future__ import annotations

import json
import math
import re

import pytest

from ragas_relevancy_ext.cli.output.html import histogram_svg, render_html
from ragas_relevancy_ext.cli.output.html import write as write_html
from ragas_relevancy_ext.cli.output.jsonl import (
    JsonlWriter,
    ReportFileError,
    read_report_lines,
    report_from_record,
    report_line,
)
from ragas_relevancy_ext.cli.stats import summarise
from ragas_relevancy_ext.report import Probe, RelevancyReport

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def make_report(score: float = 0.8, **changes) -> RelevancyReport:
    values = dict(
        user_input="Where is order A17?",
        response="It shipped on 3 March.",
        score=score,
        strictness=2,
        probe_prompt="diverse",
        all_noncommittal=False,
        probes=[Probe("When did A17 ship?", 0, 0.9), Probe("What shipped?", 1, 0.6)],
        judge_calls=1,
        distinct_probes=2,
    )
    values.update(changes)
    return RelevancyReport(**values)


def test_report_line_round_trips_and_carries_row_meta():
    report = make_report()
    line = report_line(7, "abc", report, "offline", "hash", {"id": "x"})
    assert line.endswith("\n") and line.count("\n") == 1
    record = json.loads(line)
    assert (record["row"], record["key"], record["judge"], record["extra"]) == (
        7,
        "abc",
        "offline",
        {"id": "x"},
    )
    assert report_from_record(record) == report


def test_nan_score_is_written_as_null_and_read_back_as_nan():
    line = report_line(1, "k", make_report(math.nan, probes=[], error="boom"), "j", "e")
    record = json.loads(line)
    assert record["score"] is None
    assert math.isnan(report_from_record(record).score)


def test_writer_flushes_each_line_before_closing(tmp_path):
    path = tmp_path / "out" / "report.jsonl"
    with JsonlWriter(path, "offline", "hash") as writer:
        writer.write(1, "k1", make_report())
        assert len(path.read_text().splitlines()) == 1
        writer.write(2, "k2", make_report())
        assert len(path.read_text().splitlines()) == 2
    assert set(read_report_lines(path)) == {(1, "k1"), (2, "k2")}


def test_a_line_cut_off_mid_write_is_dropped_so_appending_goes_on(tmp_path):
    path = tmp_path / "report.jsonl"
    whole = report_line(1, "k1", make_report(), "j", "e")
    path.write_text(whole + '{"row": 2, "key": "k2", "user_in', encoding="utf-8")
    assert set(read_report_lines(path)) == {(1, "k1")}
    assert path.read_text(encoding="utf-8") == whole
    with JsonlWriter(path, "j", "e") as writer:
        writer.write(2, "k2", make_report())
    assert set(read_report_lines(path)) == {(1, "k1"), (2, "k2")}


def test_a_foreign_file_is_not_appended_to(tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_text("hello\n", encoding="utf-8")
    with pytest.raises(ReportFileError, match="line 1 is not a report line"):
        read_report_lines(path)
    assert read_report_lines(tmp_path / "absent.jsonl") == {}


def page_for(*reports: RelevancyReport) -> str:
    items = list(enumerate(reports, 1))
    summary = summarise([(n, r.score, r.user_input) for n, r in items])
    return render_html(items, summary, {"judge": "offline", "file": HOSTILE})


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
    assert not re.search(r"<(script|link|iframe|img)\b", page)
    assert not re.search(r"\b(src|href)\s*=", page)
    assert "@import" not in page and "url(" not in page
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"]  # a namespace


def test_page_shows_summary_probes_bars_and_flags():
    page = page_for(make_report(0.75), make_report(0.0, all_noncommittal=True))
    assert "When did A17 ship?" in page and "What shipped?" in page
    assert 'style="width:90.0%"' in page and 'style="width:60.0%"' in page
    assert "noncommittal" in page and "drifted" in page and "all noncommittal" in page
    assert "<td>mean</td><td>0.3750</td>" in page
    assert page.count('class="card"') == 2


def test_histogram_counts_scores_by_tenth_and_nan_apart():
    svg = histogram_svg([0.05, 0.95, 1.0, 0.55, -0.2, math.nan])
    titles = dict(re.findall(r"<title>([\d.]+-[\d.]+): (\d+)</title>", svg))
    assert titles["0.0-0.1"] == "2"  # 0.05 and the negative score
    assert titles["0.9-1.0"] == "2"  # 0.95 and exactly 1.0
    assert titles["0.5-0.6"] == "1"
    assert "not scored (NaN): 1" in svg


def test_summary_counts_zeros_and_nans_and_lists_the_lowest():
    summary = summarise(
        [(1, 0.9, "a"), (2, 0.0, "b"), (3, math.nan, "c"), (4, 0.4, "d"), (5, 0.0, "e")],
        lowest=3,
    )
    assert (summary.n, summary.scored, summary.zeros, summary.nans) == (5, 4, 2, 1)
    assert summary.mean == pytest.approx(1.3 / 4)
    assert summary.median == pytest.approx(0.2)
    assert [low.number for low in summary.lowest] == [2, 5, 4]
