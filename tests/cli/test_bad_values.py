"""Values JSON or UTF-8 cannot carry (NaN, Infinity, lone surrogates, huge or deep values) in
the input: written safely or set aside naming row and line, the other rows scored, resumable."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragas_relevancy_ext.cli import app
from ragas_relevancy_ext.cli.datafile import DataFileError, read_file
from ragas_relevancy_ext.cli.output.jsonl import report_line
from ragas_relevancy_ext.scoring.report import Probe, RelevancyReport, row_key

OFFLINE = ["--embeddings", "hash"]
LONE = "\ud83d"  # half of a surrogate pair: JSON's "\ud83d" escape reads as this


def invoke(*args: str | Path):
    return CliRunner().invoke(app, [str(a) for a in args])


def rows_of(n: int) -> list[dict]:
    return [
        {
            "user_input": f"What is the policy on case {i}?",
            "response": f"Case {i} is handled within {i % 9 + 1} days. Contact support.",
            "rating": i,
        }
        for i in range(n)
    ]


def write_jsonl(path: Path, rows: list[object]) -> Path:
    """Lines as Python's json.dumps writes them by default: NaN as NaN, a surrogate escaped."""
    text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
    path.write_text(text, encoding="utf-8")
    return path


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def bad_rows(n: int = 30) -> list[dict]:
    """``n`` rows: a NaN rating every 10th, Infinity, nested NaN, a surrogate in a response."""
    rows = rows_of(n)
    for i in range(9, n, 10):
        rows[i]["rating"] = math.nan
    rows[3]["rating"] = math.inf
    rows[4]["rating"] = -math.inf
    rows[5]["tags"] = [1, math.nan, {"deep": [math.inf, "ok"]}]
    rows[6]["response"] = f"Case 6 is handled {LONE} within 7 days."
    rows[7]["note" + LONE] = "a column name with a surrogate " + LONE
    return rows


def test_nan_infinity_and_surrogates_are_written_safely_and_a_rerun_scores_nothing(tmp_path):
    data = write_jsonl(tmp_path / "rows.jsonl", bad_rows(30))
    out = tmp_path / "out.jsonl"
    first = invoke("score", data, *OFFLINE, "--out", out, "--no-table")
    assert first.exit_code == 0, first.output
    assert "0 row(s) already there, 30 to score" in first.stdout
    assert "30 sample(s), 30 scored" in first.stdout
    saved = records(out)
    assert [r["row"] for r in saved] == list(range(1, 31))
    assert all(r["error"] is None and "skipped" not in r for r in saved)
    assert [saved[i]["extra"]["rating"] for i in (3, 4, 9, 19, 29)] == [None] * 5
    assert saved[8]["extra"]["rating"] == 8
    assert saved[5]["extra"]["tags"] == [1, None, {"deep": [None, "ok"]}]
    assert saved[6]["response"] == "Case 6 is handled \ufffd within 7 days."
    assert saved[7]["extra"] == {"rating": 7, "note\ufffd": "a column name with a surrogate \ufffd"}

    again = invoke("score", data, *OFFLINE, "--out", out, "--no-table")
    assert again.exit_code == 0, again.output
    assert "30 row(s) already there, 0 to score" in again.stdout
    assert f"wrote 0 new line(s) to {out}" in again.stdout
    assert records(out) == saved


def test_the_row_key_of_a_text_with_a_lone_surrogate_is_that_of_its_cleaned_text():
    raw = row_key(f"Why {LONE}?", "Because.", "tag")
    assert raw == row_key("Why \ufffd?", "Because.", "tag")
    assert raw != row_key("Why ?", "Because.", "tag")


def test_a_nan_question_or_response_is_set_aside_by_row_and_line_with_its_columns(tmp_path):
    rows: list[object] = rows_of(4)
    rows[1] = {"user_input": math.nan, "response": "Yes.", "rating": math.nan}
    rows[2] = {"user_input": "Why?", "response": math.inf, "rating": 2}
    data = read_file(write_jsonl(tmp_path / "rows.jsonl", rows))
    assert [r.number for r in data.rows] == [1, 4]
    assert data.describe_bad() == [
        "row 2, line 2: user_input is NaN, not text",
        "row 3, line 3: response is Infinity, not text",
    ]
    assert [b.extra for b in data.bad] == [{"rating": None}, {"rating": 2}]


def test_skipped_rows_keep_their_other_columns_in_out(tmp_path):
    rows: list[object] = rows_of(3)
    rows[1] = {"user_input": "No answer here?", "rating": 5, "id": "b-7"}
    rows.append({"user_input": "Empty?", "response": " ", "rating": math.nan})
    data = write_jsonl(tmp_path / "rows.jsonl", rows)
    out = tmp_path / "out.jsonl"
    result = invoke("score", data, *OFFLINE, "--out", out, "--no-table")
    assert result.exit_code == 3, result.output
    saved = records(out)
    assert [r.get("skipped") for r in saved] == [None, "no response", None, "response is empty"]
    assert saved[1]["extra"] == {"rating": 5, "id": "b-7"}
    assert saved[3]["extra"] == {"rating": None}


def test_the_header_and_the_summary_count_the_same_rows(tmp_path):
    rows: list[object] = rows_of(3)
    rows += [{"user_input": "No answer?"}, "[1, 2]", "{not json"]
    data = write_jsonl(tmp_path / "rows.jsonl", rows)
    result = invoke("score", data, *OFFLINE, "--no-table")
    assert f"file: {data} (6 row(s), 3 bad)" in result.stdout
    assert "6 sample(s), 3 scored" in result.stdout


@pytest.mark.parametrize("bad_line", [2, 3, 1501])
def test_a_csv_that_is_not_utf8_is_named_by_its_real_line(tmp_path, bad_line):
    lines = ["user_input,response,rating"] + [f"Question {i}?,Answer {i}.,{i}" for i in range(2000)]
    lines[bad_line - 1] = "Caf\xe9?,Yes.,1"  # Latin-1: byte 0xe9 alone is not UTF-8
    path = tmp_path / "rows.csv"
    path.write_bytes(("\ufeff" + "\n".join(lines) + "\n").encode("latin-1", "ignore"))
    with pytest.raises(DataFileError) as caught:
        read_file(path)
    assert f"not UTF-8 text (byte 0xe9 on line {bad_line})" in str(caught.value)


def test_values_json_parses_but_python_cannot_hold_set_only_their_row_aside(tmp_path):
    big = 2**200  # a big number Python reads: kept as it is
    huge = "9" * 5000  # over Python's limit on the digits of an int read from text
    deep = "[" * 100_000 + "]" * 100_000
    rows: list[object] = rows_of(4)
    rows[0]["rating"] = big
    rows[1] = f'{{"user_input": "Q?", "response": "A.", "rating": {huge}}}'
    rows[2] = f'{{"user_input": "Q?", "response": "A.", "rating": {deep}}}'
    data = read_file(write_jsonl(tmp_path / "rows.jsonl", rows))
    assert [r.number for r in data.rows] == [1, 4]
    assert data.rows[0].extra == {"rating": big}
    with pytest.raises(ValueError) as too_long:  # Python's words (they vary by version)
        json.loads(huge)
    said = str(too_long.value).split(";")[0]  # without its advice to set_int_max_str_digits()
    assert "4300" in said and "5000 digits" in said
    assert data.describe_bad() == [
        f"row 2, line 2: not readable as JSON ({said})",
        "row 3, line 3: not readable as JSON (nested too deeply)",
    ]


def test_a_json_file_with_nan_extras_reads_them_as_null(tmp_path):
    rows = rows_of(2)
    rows[0]["rating"] = math.nan
    rows[1]["scores"] = {"a": math.inf, "b": [math.nan]}
    path = tmp_path / "rows.json"
    path.write_text(json.dumps({"rows": rows}), encoding="utf-8")
    data = read_file(path)
    assert [r.extra for r in data.rows] == [
        {"rating": None},
        {"rating": 1, "scores": {"a": None, "b": [None]}},
    ]


def test_report_line_writes_what_json_and_utf8_cannot_carry_safely():
    report = RelevancyReport(
        user_input="Where is A17?",
        response="It shipped.",
        score=0.5,
        strictness=1,
        probe_prompt="diverse",
        all_noncommittal=False,
        probes=[Probe(f"When did A17 ship {LONE}?", 0, 0.5, "en")],  # a judge's reply
        notes=[f"reply: {LONE}"],
    )
    extra = {"rating": math.nan, "nested": [{"x": -math.inf}], "text": LONE}
    line = report_line(1, "k", report, "offline", "hash", extra)
    line.encode("utf-8")
    record = json.loads(line)
    assert record["extra"] == {"rating": None, "nested": [{"x": None}], "text": "\ufffd"}
    assert record["probes"][0]["question"] == "When did A17 ship \ufffd?"
    assert record["notes"] == ["reply: \ufffd"]


def test_a_report_holding_surrogate_escapes_shows_and_renders_as_html(tmp_path):
    data = write_jsonl(tmp_path / "rows.jsonl", rows_of(2))
    out = tmp_path / "out.jsonl"
    assert invoke("score", data, *OFFLINE, "--out", out).exit_code == 0
    saved = records(out)
    saved[0]["user_input"] = f"Edited by hand {LONE}?"
    saved[0]["probes"][0]["question"] = f"A probe {LONE}?"
    out.write_text("".join(json.dumps(r) + "\n" for r in saved), encoding="utf-8")
    assert "\\ud83d" in out.read_text(encoding="utf-8")
    page = tmp_path / "page.html"
    result = invoke("show", out, "--html", page)
    assert result.exit_code == 0, result.output
    assert "Edited by hand \ufffd?" in result.stdout
    assert "A probe \ufffd?" in page.read_text(encoding="utf-8")


def test_a_report_line_edited_to_hold_nan_is_renumbered_as_null(tmp_path):
    data = write_jsonl(tmp_path / "rows.jsonl", rows_of(2))
    out = tmp_path / "out.jsonl"
    assert invoke("score", data, *OFFLINE, "--out", out).exit_code == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    lines[0] = lines[0].replace('"extra": {"rating": 0}', '"extra": {"rating": NaN}')
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    new = {"user_input": "What is new?", "response": "This is new. Ask us.", "rating": 9}
    write_jsonl(data, [new, *rows_of(2)])  # every row moves down one: the lines are rewritten
    result = invoke("score", data, *OFFLINE, "--out", out)
    assert result.exit_code == 0, result.output
    assert "2 row(s) already there, 1 to score" in result.stdout
    saved = records(out)
    assert [r["row"] for r in saved] == [1, 2, 3]
    assert saved[1]["extra"] == {"rating": None}
