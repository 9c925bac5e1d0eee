"""Reading rows from JSONL, CSV and JSON: renaming, bad rows by line, whole-file errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragas_relevancy_ext.cli.datafile import DataFileError, parse_map, read_file, row_key


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def jsonl(*rows: object) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


def test_jsonl_rows_keep_line_numbers_and_other_columns(tmp_path):
    path = write(
        tmp_path,
        "a.jsonl",
        jsonl(
            {"user_input": "Q1?", "response": "A1.", "rating": 4},
            "",
            {"user_input": "Q2?", "response": "A2."},
        ),
    )
    data = read_file(path)
    assert [(r.number, r.line, r.user_input, r.response) for r in data.rows] == [
        (1, 1, "Q1?", "A1."),
        (2, 3, "Q2?", "A2."),  # a blank line is not a row
    ]
    assert data.rows[0].extra == {"rating": 4}
    assert data.bad == []


def test_bad_jsonl_rows_are_listed_by_line_and_good_ones_kept(tmp_path):
    path = write(
        tmp_path,
        "a.jsonl",
        jsonl(
            {"user_input": "Q1?", "response": "A1."},
            "{broken",
            {"user_input": "Q3?"},
            {"user_input": "  ", "response": "A4."},
            [1, 2],
            {},
            {"user_input": "Q7?", "response": 7},
            {"user_input": "Q8?", "response": "A8."},
        ),
    )
    data = read_file(path)
    assert [r.number for r in data.rows] == [1, 8]
    problems = {b.number: b.problem for b in data.bad}
    assert problems == {
        2: problems[2],
        3: "no response",
        4: "user_input is empty",
        5: "expected an object with fields, got list",
        6: "empty row",
        7: "response is int, not text",
    }
    assert problems[2].startswith("not valid JSON")
    assert data.describe_bad()[0].startswith("row 2, line 2: not valid JSON")


def test_csv_with_map_and_multiline_cells(tmp_path):
    text = 'question,answer,score\n"Q1?","A1, with a comma",5\n,,\n"Q3?","line one\nline two",2\n'
    path = write(tmp_path, "a.csv", text)
    data = read_file(path, ["question=user_input", "answer=response"], numeric="score")
    assert [(r.number, r.line, r.response) for r in data.rows] == [
        (1, 2, "A1, with a comma"),
        (3, 4, "line one\nline two"),
    ]
    assert data.rows[0].extra == {"score": 5.0}
    assert [(b.number, b.line, b.problem) for b in data.bad] == [(2, 3, "empty row")]
    assert data.warnings == []  # a quoted cell over two lines is fine


def test_json_list_or_rows_object(tmp_path):
    rows = [{"user_input": "Q?", "response": "A."}, "oops"]
    for payload in (rows, {"rows": rows}):
        data = read_file(write(tmp_path, "a.json", json.dumps(payload)))
        assert [(r.number, r.line) for r in data.rows] == [(1, None)]
        assert data.describe_bad() == ["row 2: expected an object with fields, got str"]


def test_map_works_either_way_round_and_checks_its_input():
    assert parse_map(["question=user_input", "response=answer"]) == {
        "question": "user_input",
        "answer": "response",
    }
    for bad in (["question"], ["a=b"], ["user_input=response"], ["q=user_input", "x=user_input"]):
        with pytest.raises(DataFileError, match="--map"):
            parse_map(bad)


def test_missing_column_names_what_is_there_and_how_to_map(tmp_path):
    path = write(tmp_path, "a.csv", "question,answer\nQ?,A.\n")
    with pytest.raises(DataFileError) as err:
        read_file(path)
    message = str(err.value)
    assert "no 'user_input' column" in message
    assert "answer, question" in message and "--map COLUMN=user_input" in message
    with pytest.raises(DataFileError, match="--map names column 'query'"):
        read_file(path, ["query=user_input"])


def test_numeric_column_must_exist_and_hold_numbers(tmp_path):
    path = write(
        tmp_path,
        "a.jsonl",
        jsonl(
            {"user_input": "Q?", "response": "A.", "rating": "4"},
            {"user_input": "Q?", "response": "A.", "rating": "high"},
            {"user_input": "Q?", "response": "A."},
        ),
    )
    data = read_file(path, numeric="rating")
    assert [r.extra["rating"] for r in data.rows] == [4.0]
    assert [b.number for b in data.bad] == [2, 3]
    with pytest.raises(DataFileError, match="no 'stars' column"):
        read_file(path, numeric="stars")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.jsonl", None, "no such file"),
        (
            "latin1.jsonl",
            '{"user_input": "caf\xe9?", "response": "A."}\n'.encode("latin-1"),
            "not UTF-8",
        ),
        ("empty.jsonl", "\n\n", "no rows"),
        ("empty.csv", "", "no rows"),
        ("a.txt", "x", "unknown file type"),
        ("a.json", "{not json", "not valid JSON"),
        ("a.json", '{"x": 1}', "expected a list of rows"),
        ("allbad.jsonl", '{"user_input": "", "response": ""}\n', "no usable row"),
    ],
)
def test_whole_file_problems_are_one_sentence(tmp_path, name, content, message):
    path = tmp_path / name if content is None else write(tmp_path, name, content)
    with pytest.raises(DataFileError, match=message) as err:
        read_file(path)
    assert "\n" not in str(err.value)


def test_utf8_with_bom_reads(tmp_path):
    path = write(tmp_path, "a.csv", "\ufeffuser_input,response\nQ?,A.\n")
    assert read_file(path).rows[0].user_input == "Q?"


def test_row_key_depends_on_both_texts():
    assert row_key("Q", "A") == row_key("Q", "A") != row_key("Q", "A", "other settings")
    assert len({row_key("Q", "A"), row_key("Q", "B"), row_key("QA", "")}) == 3


def test_rows_are_numbered_alike_in_jsonl_csv_and_json(tmp_path):
    rows = [
        {"user_input": "Q1?", "response": "A1."},
        {"user_input": "Q2?", "response": ""},
        {"user_input": "Q3?", "response": "A3."},
    ]
    csv_text = "user_input,response\n" + "".join(
        f'"{r["user_input"]}","{r["response"]}"\n' for r in rows
    )
    files = [
        write(tmp_path, "a.jsonl", jsonl(*rows)),
        write(tmp_path, "a.csv", csv_text),
        write(tmp_path, "a.json", json.dumps(rows)),
    ]
    for path in files:
        data = read_file(path)
        assert [r.number for r in data.rows] == [1, 3], path
        assert [b.number for b in data.bad] == [2], path


def test_an_unbalanced_csv_quote_that_swallows_rows_is_warned_of_by_line(tmp_path):
    text = 'user_input,response\nQ1?,A1.\nQ2?,"oops\nQ3?,A3.\nQ4?,A4.\n'
    data = read_file(write(tmp_path, "a.csv", text))
    assert [r.number for r in data.rows] == [1, 2]  # rows 3 and 4 were swallowed into row 2
    assert data.warnings[0].startswith("line 3: the 'response' cell runs over lines 3-5")
    assert "unbalanced quote on line 3" in data.warnings[0]
    assert "2 row(s) were read from 4 data line(s)" in data.warnings[-1]
