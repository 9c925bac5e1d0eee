"""``diff``, ``plan``, ``show --cluster`` and ``calibrate``'s threshold on saved reports."""

from __future__ import annotations

import io
import json
import math
import re
import statistics
from pathlib import Path

import pytest
from common import ROOT
from rich.console import Console
from typer.testing import CliRunner

from ragas_relevancy_ext.cli import app
from ragas_relevancy_ext.cli.calibrate import default_good_from, print_threshold
from ragas_relevancy_ext.cli.output.jsonl import report_line
from ragas_relevancy_ext.error_bars import rows_needed
from ragas_relevancy_ext.scoring.report import Probe, RelevancyReport, row_key


def invoke(*args: str | Path):
    return CliRunner().invoke(app, [str(a) for a in args])


def sample(question: str, cosines: list[float], response: str = "an answer") -> RelevancyReport:
    probes = [Probe(f"{question} probe {i}", 0, c) for i, c in enumerate(cosines)]
    score = sum(cosines) / len(cosines) if cosines else math.nan
    return RelevancyReport(question, response, score, 3, "diverse", False, probes)


def write(path: Path, rows: list[tuple[str, list[float], dict]], response: str = "A") -> Path:
    lines = [
        report_line(
            n, row_key(q, response), sample(q, c, response), "offline", "hash", extra, line=n
        )
        for n, (q, c, extra) in enumerate(rows, 1)
    ]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def run_rows(shift: float = 0.0, n: int = 40) -> list[tuple[str, list[float], dict]]:
    """``n`` questions in 8 documents; scores spread out, probes around each score."""
    rows = []
    for i in range(n):
        base = 0.3 + 0.5 * ((i * 7) % n) / n + shift
        rows.append((f"Question {i}?", [base - 0.02, base, base + 0.03], {"doc": f"d{i % 8}"}))
    return rows


def diff_json(a: Path, b: Path, *more: str):
    result = invoke("diff", a, b, "--json", *more)
    return result, json.loads(result.stdout) if result.stdout.strip() else None


# -- diff ------------------------------------------------------------------------------------


def test_diff_json_fields_and_no_drop_on_the_same_run(tmp_path):
    a = write(tmp_path / "a.jsonl", run_rows())
    result, out = diff_json(a, a)
    assert result.exit_code == 0, result.output
    for field in ("n_pairs", "mean_a", "mean_b", "diff", "ci_low", "ci_high", "p_value"):
        assert field in out
    assert (out["n_pairs"], out["only_in_a"], out["only_in_b"], out["diff"]) == (40, 0, 0, 0.0)
    assert out["p_value"] == 1.0 and out["significant_drop"] is False


def test_a_reordered_file_with_other_responses_pairs_the_same(tmp_path):
    rows = run_rows()
    a = write(tmp_path / "a.jsonl", rows)
    b = write(tmp_path / "b.jsonl", list(reversed(rows)), response="another system's answer")
    result, out = diff_json(a, b)
    assert result.exit_code == 0
    assert (out["n_pairs"], out["diff"], out["only_in_a"], out["only_in_b"]) == (40, 0.0, 0, 0)


def test_partly_overlapping_files_count_the_rows_only_in_one(tmp_path):
    rows = run_rows()
    a = write(tmp_path / "a.jsonl", rows[:30])
    b = write(tmp_path / "b.jsonl", rows[10:] + [("A new question?", [0.5, 0.6], {})])
    result, out = diff_json(a, b)
    assert (out["n_pairs"], out["only_in_a"], out["only_in_b"]) == (20, 10, 11)
    paired = [sum(c) / len(c) for _, c, _ in rows[10:30]]
    assert out["mean_a"] == pytest.approx(statistics.fmean(paired))


def test_a_significant_drop_exits_1_and_a_margin_above_it_exits_0(tmp_path):
    a = write(tmp_path / "a.jsonl", run_rows())
    lower = [
        (q, [x - 0.05 - 0.01 * (i % 3) for x in c], e) for i, (q, c, e) in enumerate(run_rows())
    ]
    b = write(tmp_path / "b.jsonl", lower)
    result, out = diff_json(a, b)
    assert result.exit_code == 1
    drop = statistics.fmean(0.05 + 0.01 * (i % 3) for i in range(40))
    assert out["diff"] == pytest.approx(-drop, abs=1e-9) and out["ci_high"] < 0
    assert out["significant_drop"] is True and out["p_value"] < 0.001
    result, out = diff_json(a, b, "--margin", "0.1")
    assert result.exit_code == 0 and out["significant_drop"] is False
    assert invoke("diff", b, a).exit_code == 0  # a rise is no drop


def test_diff_clusters_by_a_column_and_names_a_missing_one(tmp_path):
    a = write(tmp_path / "a.jsonl", run_rows())
    b = write(tmp_path / "b.jsonl", run_rows(shift=-0.01))
    result, out = diff_json(a, b, "--cluster", "doc")
    assert (out["method"], out["clusters"]) == ("cr2", 8)
    result = invoke("diff", a, b, "--cluster", "chapter")
    assert result.exit_code == 2
    assert "--cluster chapter: 40 scored row(s) have no value" in result.output


def test_diff_names_bad_input(tmp_path):
    a = write(tmp_path / "a.jsonl", run_rows())
    other = write(tmp_path / "o.jsonl", [("Unrelated?", [0.5, 0.6], {})])
    result = invoke("diff", a, other)
    assert result.exit_code == 2 and "nothing to pair" in result.output
    result = invoke("diff", a, tmp_path / "missing.jsonl")
    assert result.exit_code == 2 and "no such file" in result.output


def test_diff_table_shows_the_rows_that_moved_with_both_probes_and_no_raw_controls(tmp_path):
    rows = run_rows()
    rows[3] = ("Evil \x1b[31mquestion?", [0.8, 0.8, 0.8], {})
    a = write(tmp_path / "a.jsonl", rows)
    moved = list(rows)
    moved[3] = (rows[3][0], [0.1, 0.2, 0.1], {})
    b = write(tmp_path / "b.jsonl", moved)
    result = invoke("diff", a, b, "--top", "1")
    assert "\x1b" not in result.stdout and "Evil <U+001B>[31mquestion?" in result.stdout
    assert "-0.6667" in result.stdout  # the row that moved most, B - A
    assert "0.80 Evil" in result.stdout and "0.10 Evil" in result.stdout  # both runs' probes
    assert "only in A 0, only in B 0" in result.stdout


def test_diff_html_page_and_its_file_guard(tmp_path):
    a = write(tmp_path / "a.jsonl", run_rows())
    b = write(tmp_path / "b.jsonl", run_rows(shift=-0.02))
    page = tmp_path / "diff.html"
    assert invoke("diff", a, b, "--html", page).exit_code in (0, 1)
    text = page.read_text(encoding="utf-8")
    assert 'name="generator" content="ragas-relevancy-ext"' in text and "B - A" in text
    assert invoke("diff", a, b, "--html", page).exit_code in (0, 1)  # our page: replaced
    notes = tmp_path / "notes.html"
    notes.write_text("mine", encoding="utf-8")
    result = invoke("diff", a, b, "--html", notes)
    assert result.exit_code == 2 and notes.read_text(encoding="utf-8") == "mine"
    assert invoke("diff", a, b, "--html", b).exit_code == 2


# -- plan ------------------------------------------------------------------------------------


def test_plan_from_a_known_variance(tmp_path):
    rows = run_rows()
    report = write(tmp_path / "a.jsonl", rows)
    scores = [sum(c) / 3 for _, c, _ in rows]
    within = statistics.fmean(statistics.variance(c) / 3 for _, c, _ in rows)
    between = statistics.variance(scores) - within
    kwargs = dict(between=between, within=within, strictness_then=3, correlation=0.5)
    result = invoke("plan", report, "--detect", "0.02")
    assert result.exit_code == 0, result.output
    assert f"at strictness 3: {rows_needed(0.02, strictness=3, **kwargs):,} rows" in result.stdout
    table = dict(re.findall(r"^\s+(\d+)\s+([\d,]+)\s", result.stdout, flags=re.M))
    for k in (1, 2, 3, 5, 8, 12):
        assert table[str(k)] == f"{rows_needed(0.02, strictness=k, **kwargs):,}"
    assert invoke("plan", report, "--detect", "0").exit_code == 2


def test_plan_needs_two_probes_to_split_the_variance(tmp_path):
    report = write(tmp_path / "a.jsonl", [(f"Q{i}?", [0.1 * i], {}) for i in range(5)])
    result = invoke("plan", report, "--detect", "0.02")
    assert result.exit_code == 2 and "--strictness 2 or more" in result.output


# -- show ------------------------------------------------------------------------------------


def test_show_gives_each_stderr_and_the_runs_interval_clustered_or_not(tmp_path):
    report = write(tmp_path / "a.jsonl", run_rows())
    out = invoke("show", report).stdout
    se = statistics.stdev([0.28, 0.3, 0.33]) / math.sqrt(3)  # row 1: base 0.3
    assert f"±{se:.3f}" in out
    assert "(95% CI " in out and ", clt, n=40)" in out and "variance: between questions" in out
    out = invoke("show", report, "--no-table", "--cluster", "doc").stdout
    assert "clustered over 8 clusters, under 10 clusters: a rough interval, n=40" in out
    out = invoke("show", report, "--no-table", "--interval", "bootstrap").stdout
    assert ", bootstrap, n=40)" in out
    page = tmp_path / "page.html"
    assert invoke("show", report, "--html", page).exit_code == 0
    html = page.read_text(encoding="utf-8")
    assert f"± {se:.3f}" in html and "95% CI (clt)" in html and "within (probes)" in html


def test_show_names_a_cluster_column_the_report_lacks(tmp_path):
    report = write(tmp_path / "a.jsonl", run_rows())
    result = invoke("show", report, "--cluster", "document_id")
    assert result.exit_code == 2
    assert "--cluster document_id" in result.output and "doc" in result.output


# -- calibrate's threshold -------------------------------------------------------------------


def test_calibrate_threshold_on_a_known_split():
    console = Console(file=io.StringIO(), width=200)
    scores = [0.9, 0.8, 0.7, 0.3, 0.2, 0.1]
    ratings = [5, 4, 4, 2, 1, 3]
    assert default_good_from(ratings) == 4
    print_threshold(console, scores, ratings, "rating", None, 200, 1)
    text = console.file.getvalue()
    assert "good: rating >= 4 (3 row(s)), bad: below 4 (3)" in text and "default" in text
    assert "threshold 0.500" in text and "100% of good and 0% of bad" in text


def test_calibrate_prints_the_threshold_on_the_example_data():
    data = ROOT / "examples" / "support_qa.jsonl"
    result = invoke(
        "calibrate", data, "--ratings", "rating", "--embeddings", "hash", "--good-from", "5"
    )
    assert result.exit_code == 0, result.output
    assert "good: rating >= 5" in result.stdout and "[--good-from]" in result.stdout
    assert "separates them best" in result.stdout


# -- score -----------------------------------------------------------------------------------


def test_score_clusters_by_an_input_column_and_refuses_one_it_lacks(tmp_path):
    data = tmp_path / "data.jsonl"
    lines = [json.loads(line) for line in (ROOT / "examples" / "support_qa.jsonl").open()][:12]
    data.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    result = invoke("score", data, "--embeddings", "hash", "--no-table", "--cluster", "kind")
    assert result.exit_code == 0, result.output
    kinds = len({r["kind"] for r in lines})
    assert f"clustered over {kinds} clusters" in result.stdout
    result = invoke("score", data, "--embeddings", "hash", "--cluster", "document")
    assert result.exit_code == 2 and "--cluster document: no row of" in result.output
    result = invoke("score", data, "--engine", "ray", "--cluster", "kind")
    assert result.exit_code == 2 and "--cluster and --interval need --engine local" in result.output


def test_diff_id_pairs_a_repeated_question_by_its_id(tmp_path):
    rows = [("Same question?", [0.2, 0.2], {"id": 1}), ("Same question?", [0.8, 0.8], {"id": 2})]
    rows += [(f"Other {i}?", [0.5, 0.5], {"id": 10 + i}) for i in range(3)]
    a = write(tmp_path / "a.jsonl", rows)
    changed = ("Same question?", [0.3, 0.3], {"id": 1})  # id 1 rises by 0.1
    b = write(tmp_path / "b.jsonl", [rows[1], changed, *rows[2:]])  # and comes second
    _, by_text = diff_json(a, b)  # row order pairs id 1 with id 2: +0.6 and -0.5
    assert by_text["repeated_questions"] == 1
    assert by_text["stderr"] == pytest.approx(statistics.stdev([0.6, -0.5, 0, 0, 0]) / 5**0.5)
    result, by_id = diff_json(a, b, "--id", "id")
    assert by_id["stderr"] == pytest.approx(statistics.stdev([0.1, 0, 0, 0, 0]) / 5**0.5)
    assert by_id["paired_by"] == "question text and input column 'id'"
    assert invoke("diff", a, b, "--id", "ticket").exit_code == 2
