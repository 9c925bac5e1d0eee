"""The JSONL report (written line by line, resumable) and the run summary."""

from __future__ import annotations

import json
import math

import pytest

from ragas_relevancy_ext.cli.output.jsonl import (
    ReportFile,
    ReportFileError,
    report_from_record,
    report_line,
)
from ragas_relevancy_ext.cli.stats import summarise
from ragas_relevancy_ext.scoring.report import Probe, RelevancyReport, row_key


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
    report = ReportFile(path)
    report.begin()
    report.write("k1", report_line(1, "k1", make_report(), "offline", "hash"))
    assert len(path.read_text().splitlines()) == 1
    report.write("k2", report_line(2, "k2", make_report(), "offline", "hash"))
    assert len(path.read_text().splitlines()) == 2
    report.close()
    assert set(ReportFile(path).index) == {"k1", "k2"}


def test_a_line_cut_off_mid_write_is_dropped_so_appending_goes_on(tmp_path):
    path = tmp_path / "report.jsonl"
    whole = report_line(1, "k1", make_report(), "j", "e")
    torn = report_line(2, "k2", make_report(), "j", "e")[:60]
    path.write_text(whole + torn, encoding="utf-8")
    report = ReportFile(path)
    assert set(report.index) == {"k1"}
    assert path.read_text(encoding="utf-8") == whole + torn  # reading changes nothing
    report.begin()
    assert path.read_text(encoding="utf-8") == whole
    report.write("k2", report_line(2, "k2", make_report(), "j", "e"))
    report.close()
    assert set(ReportFile(path).index) == {"k1", "k2"}


@pytest.mark.parametrize(
    "content",
    [b"hello\n", b"\x00\x01binary without a newline", b'{"row": 1}\n', b"user_input,response\n"],
)
def test_a_foreign_file_is_refused_and_left_byte_for_byte(tmp_path, content):
    path = tmp_path / "notes.jsonl"
    path.write_bytes(content)
    with pytest.raises(ReportFileError, match="not a report of ragas-relevancy"):
        ReportFile(path)
    assert path.read_bytes() == content
    assert ReportFile(tmp_path / "absent.jsonl").index == {}


def written(path, lines: list[tuple[int, str, RelevancyReport]]) -> ReportFile:
    """A report file open for appending, with these (row, key, report) lines written."""
    report = ReportFile(path)
    report.begin()
    for number, key, item in lines:
        report.write(key, report_line(number, key, item, "j", "e"))
    return report


FAILED = make_report(math.nan, probes=[], error="boom")


def test_compaction_keeps_one_line_per_row_in_input_order(tmp_path):
    path = tmp_path / "report.jsonl"
    report = written(
        path,
        [(2, "b", FAILED), (1, "a", make_report()), (2, "b", make_report(0.5)),  # retry scored
         (3, "gone", make_report())],
    )  # fmt: skip
    assert report.compact([("a", 1, None), ("b", 2, None), ("a", 3, None)]) == 3
    report.close()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["row"], r["key"], r["score"]) for r in records] == [
        (1, "a", 0.8),
        (2, "b", 0.5),
        (3, "a", 0.8),
    ]


def test_deduplication_keeps_one_line_per_key_where_it_first_appeared(tmp_path):
    path = tmp_path / "report.jsonl"
    report = written(
        path,
        [(1, "b", FAILED), (2, "a", make_report()), (3, "b", make_report(0.5)),  # retry scored
         (4, "b", FAILED)],  # a failure never wins over a scored line
    )  # fmt: skip
    assert report.deduplicate() == 2
    report.close()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["row"], r["key"], r["score"]) for r in records] == [(3, "b", 0.5), (2, "a", 0.8)]
    before = path.read_bytes()
    assert ReportFile(path).deduplicate() == 2  # nothing repeated: the file is left as it is
    assert path.read_bytes() == before


def test_a_report_dict_writes_the_same_line_as_its_report():
    report = make_report()
    assert report_line(1, "k", report.to_dict(), "j", "e") == report_line(1, "k", report, "j", "e")


def test_the_row_key_tells_missing_values_from_their_text():
    assert row_key("Q", "A") == row_key("Q", "A") != row_key("Q", "A", "tag")
    assert len({row_key(None, "A"), row_key("None", "A"), row_key("null", "A")}) == 3
    assert len({row_key(1, "A"), row_key("1", "A")}) == 2
    assert len(row_key("Q", "A")) == 20


def test_summary_counts_zeros_and_nans_and_lists_the_lowest():
    summary = summarise(
        [(1, 0.9, "a"), (2, 0.0, "b"), (3, math.nan, "c"), (4, 0.4, "d"), (5, 0.0, "e")],
        lowest=3,
    )
    assert (summary.n, summary.scored, summary.zeros, summary.nans) == (5, 4, 2, 1)
    assert summary.mean == pytest.approx(1.3 / 4)
    assert summary.median == pytest.approx(0.2)
    assert [low.number for low in summary.lowest] == [2, 5, 4]
