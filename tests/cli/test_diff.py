"""``diff``, ``plan``, ``show --cluster`` and ``calibrate``'s threshold on saved reports: failed
rows, settings, overlap and damaged reports; every figure against scipy or the package's own
formulas."""

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
from scipy import stats
from typer.testing import CliRunner

from ragas_relevancy_ext.cli import app
from ragas_relevancy_ext.cli.calibrate import default_good_from, print_threshold
from ragas_relevancy_ext.cli.output.jsonl import report_line
from ragas_relevancy_ext.error_bars import FAILURE_ALPHA, PlanModel, p_text, rows_needed
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


def dropped_runs(tmp_path: Path) -> tuple[Path, Path]:
    """Run A and a run B whose every score is 0.05-0.07 lower: a significant drop."""
    lower = [
        (q, [x - 0.05 - 0.01 * (i % 3) for x in c], e) for i, (q, c, e) in enumerate(run_rows())
    ]
    return write(tmp_path / "a.jsonl", run_rows()), write(tmp_path / "b.jsonl", lower)


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
    a, b = dropped_runs(tmp_path)
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


def test_plan_from_a_known_variance_states_the_correlation_it_assumes(tmp_path):
    rows = run_rows()
    report = write(tmp_path / "a.jsonl", rows)
    scores = [sum(c) / 3 for _, c, _ in rows]
    within = statistics.fmean(statistics.variance(c) / 3 for _, c, _ in rows)
    between = statistics.variance(scores) - within
    model = PlanModel(2 * (1 - 0.5) * between, 2 * within * 3, df=39)  # 40 rows' variance
    result = invoke("plan", report, "--detect", "0.02")
    assert result.exit_code == 0, result.output
    assert f"at strictness 3: {rows_needed(0.02, model, strictness=3):,} rows" in result.stdout
    table = dict(re.findall(r"^\s+(\d+)\s+([\d,]+)\s", result.stdout, flags=re.M))
    for k in (1, 2, 3, 5, 8, 12):
        assert table[str(k)] == f"{rows_needed(0.02, model, strictness=k):,}"
    lower = rows_needed(0.02, PlanModel(2 * 0.75 * between, 2 * within * 3, df=39), strictness=3)
    assert (
        "correlation of the two runs' true scores 0.5 (assumed, not measured: --from A B "
        f"measures it; at 0.25 a run needs {lower:,} rows at strictness 3)"
    ) in result.stdout
    result = invoke("plan", report, "--detect", "0.02", "--correlation", "0.8")
    assert "true scores 0.8\n" in result.stdout and "assumed" not in result.stdout
    assert invoke("plan", report, "--detect", "0").exit_code == 2


def test_plan_from_two_runs_measures_the_correlation_and_takes_margin_and_clusters(tmp_path):
    rows = run_rows()
    a = write(tmp_path / "a.jsonl", rows)
    moved = [(q, [x + 0.1 * ((i * 3) % 5 - 2) for x in c], e) for i, (q, c, e) in enumerate(rows)]
    b = write(tmp_path / "b.jsonl", moved)
    sa, sb = [sum(c) / 3 for _, c, _ in rows], [sum(c) / 3 for _, c, _ in moved]
    errs = [statistics.stdev(c) / math.sqrt(3) for _, c, _ in rows]
    errs_b = [statistics.stdev(c) / math.sqrt(3) for _, c, _ in moved]
    model = PlanModel.from_pairs(sa, sb, (errs, errs_b), (3, 3))
    result = invoke("plan", "--from", a, b, "--detect", "0.05")
    assert result.exit_code == 0, result.output
    r = stats.pearsonr(sa, sb).statistic
    assert f"correlation of paired scores {r:.2f} (measured)" in result.stdout
    assert f"at strictness 3: {rows_needed(0.05, model, strictness=3):,} rows" in result.stdout
    _, out = diff_json(a, b)
    assert out["correlation"] == pytest.approx(r)  # diff reports what plan measures
    margin = invoke("plan", "--from", a, b, "--detect", "0.05", "--margin", "0.02")
    needed = rows_needed(0.05, model, strictness=3, margin=0.02)
    assert f"at strictness 3: {needed:,} rows" in margin.stdout and "margin 0.02" in margin.stdout
    docs = [e["doc"] for _, _, e in rows]
    clustered = PlanModel.from_pairs(sa, sb, (errs, errs_b), (3, 3), docs)
    result = invoke("plan", "--from", a, b, "--detect", "0.05", "--cluster", "doc")
    assert f"8 clusters of 5.0 rows on average, intraclass correlation {clustered.alike:.3f}" in (
        result.stdout
    )
    assert f"{rows_needed(0.05, clustered, strictness=3):,} rows" in result.stdout
    for bad in (
        ["--detect", "0.05"],  # neither
        [a, "--from", a, b, "--detect", "0.05"],  # both
        ["--from", a, b, "--detect", "0.05", "--correlation", "0.5"],
        ["--from", a, b, "--detect", "0.02", "--margin", "0.02"],  # no drop past the margin
    ):
        assert invoke("plan", *bad).exit_code == 2


def test_plan_needs_two_probes_to_split_the_variance(tmp_path):
    report = write(tmp_path / "a.jsonl", [(f"Q{i}?", [0.1 * i], {}) for i in range(5)])
    result = invoke("plan", report, "--detect", "0.02")
    assert result.exit_code == 2 and "--strictness 2 or more" in result.output
    result = invoke("plan", "--from", report, report, "--detect", "0.02")
    assert result.exit_code == 2 and "--strictness 2 or more" in result.output


# -- show ------------------------------------------------------------------------------------


def test_show_gives_each_stderr_and_the_runs_interval_clustered_or_not(tmp_path):
    report = write(tmp_path / "a.jsonl", run_rows())
    out = invoke("show", report).stdout
    se = statistics.stdev([0.28, 0.3, 0.33]) / math.sqrt(3)  # row 1: base 0.3
    assert f"±{se:.3f}" in out
    assert "(95% CI [" in out and ", t, 39 df, n=40)" in out and "variance: between" in out
    out = invoke("show", report, "--no-table", "--cluster", "doc").stdout
    assert "CR2 over 8 clusters, 7 df, n=40; under 30 clusters: a rough interval)" in out  # G-1
    out = invoke("show", report, "--no-table", "--interval", "bootstrap").stdout
    assert ", bootstrap, n=40)" in out
    page = tmp_path / "page.html"
    assert invoke("show", report, "--html", page).exit_code == 0
    html = page.read_text(encoding="utf-8")
    assert f"± {se:.3f}" in html and "95% CI (t)" in html and "within (probes)" in html


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
    assert f"CR2 over {kinds} clusters" in result.stdout
    result = invoke("score", data, "--embeddings", "hash", "--cluster", "document")
    assert result.exit_code == 2 and "--cluster document: 12 row(s) of" in result.output
    lines[-1].pop("kind")  # the last row alone lacks it: refused before the first request
    data.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = invoke("score", data, "--embeddings", "hash", "--cluster", "kind", "--out", out)
    assert result.exit_code == 2 and "1 row(s) of" in result.output and "(rows 12)" in result.output
    assert not out.exists()
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


# -- failed rows, settings, overlap, damaged reports, numbers ---------------------------------


def hardest_failed(rows: list[tuple[str, list[float], dict]], share: float) -> list:
    """``rows`` with the lowest-scored ``share`` failed (no probe: NaN)."""
    order = sorted(range(len(rows)), key=lambda i: statistics.fmean(rows[i][1]))
    failed = set(order[: round(share * len(rows))])
    return [(q, [] if i in failed else c, e) for i, (q, c, e) in enumerate(rows)]


def test_a_run_failing_on_the_hardest_questions_exits_1_with_its_own_verdict(tmp_path):
    a = write(tmp_path / "a.jsonl", run_rows())
    b = write(tmp_path / "b.jsonl", hardest_failed(run_rows(), 0.3))
    result, out = diff_json(a, b)
    assert result.exit_code == 1
    assert (out["failed_only_b"], out["failed_only_a"], out["n_pairs"]) == (12, 0, 28)
    assert out["failure_p_value"] == pytest.approx(0.5**12) and out["failures_rose"] is True
    assert out["significant_drop"] is False and out["exit_1"] is True
    text = invoke("diff", a, b).stdout
    assert "failed (NaN) in the pairs: only in A 0, only in B 12, in both 0" in text
    assert (
        "failures: B fails significantly more often than A (exact McNemar, one-sided "
        f"p = 0.00024; exit 1 under {FAILURE_ALPHA}): exit 1"
    ) in text
    assert "scores: no significant drop (one-sided p = " in text
    every = write(tmp_path / "c.jsonl", hardest_failed(run_rows(), 1.0))
    result, out = diff_json(a, every)  # nothing scored in B: still a verdict, not bad input
    assert result.exit_code == 1 and out["n_pairs"] == 0 and out["failed_only_b"] == 40
    assert invoke("diff", every, a).exit_code == 2  # fewer failures: no verdict without pairs


def test_failed_rows_can_count_as_zero(tmp_path):
    rows = run_rows()
    a = write(tmp_path / "a.jsonl", rows)
    failed = (5, 11, 17, 23, 29, 35)  # 6 of 40: exact McNemar p = 0.016, no significant rise
    few = [(q, [] if i in failed else c, e) for i, (q, c, e) in enumerate(rows)]
    b = write(tmp_path / "b.jsonl", few)
    result, out = diff_json(a, b)
    assert result.exit_code == 0 and out["n_pairs"] == 34 and not out["failures_rose"]
    result, out = diff_json(a, b, "--failed-as-zero")
    assert result.exit_code == 1 and out["n_pairs"] == 40 and out["significant_drop"] is True
    zeros = [0.0 if i in failed else sum(c) / 3 for i, (_, c, _) in enumerate(rows)]
    assert out["mean_b"] == pytest.approx(statistics.fmean(zeros))


def test_nine_pairs_are_judged_by_a_paired_t_test(tmp_path):
    a_scores = [0.61, 0.72, 0.55, 0.80, 0.66, 0.59, 0.74, 0.69, 0.63]
    b_scores = [0.52, 0.73, 0.43, 0.82, 0.59, 0.62, 0.65, 0.71, 0.52]
    a = write(tmp_path / "a.jsonl", [(f"Q{i}?", [s, s], {}) for i, s in enumerate(a_scores)])
    b = write(tmp_path / "b.jsonl", [(f"Q{i}?", [s, s], {}) for i, s in enumerate(b_scores)])
    result, out = diff_json(a, b)
    assert result.exit_code == 0  # normal quantiles: p = 0.034 and exit 1
    assert out["p_value"] == pytest.approx(stats.ttest_rel(b_scores, a_scores).pvalue)
    assert out["df"] == 8 and out["method"] == "t"
    text = invoke("diff", a, b).stdout
    assert f"p = {out['p_value']:.4f} (two-sided)" in text
    assert f"95% CI [{out['ci_low']:.4f}, {out['ci_high']:.4f}], t, 8 df)" in text


def test_p_values_that_underflow_and_intervals_read_as_such(tmp_path):
    a = write(tmp_path / "a.jsonl", run_rows())
    b = write(tmp_path / "b.jsonl", run_rows(shift=-0.2))
    lower = [
        (q, [x - 0.2 - 1e-4 * (i % 2) for x in c], e) for i, (q, c, e) in enumerate(run_rows())
    ]
    b = write(tmp_path / "b.jsonl", lower)
    text = invoke("diff", a, b).stdout
    assert "p < 1e-16 (two-sided)" in text and "one-sided p < 1e-16; exit 1 under 0.025" in text
    assert re.search(r"95% CI \[-0\.\d{4}, -0\.\d{4}\]", text)


def score(data: Path, out: Path, *more: str) -> None:
    result = invoke("score", data, "--embeddings", "hash", "--no-table", "--out", out, *more)
    assert result.exit_code == 0, result.output


def test_runs_scored_with_other_settings_warn_and_strict_refuses(tmp_path):
    data = tmp_path / "data.jsonl"
    lines = (ROOT / "examples" / "support_qa.jsonl").read_text(encoding="utf-8").splitlines()
    data.write_text("\n".join(lines[:12]) + "\n", encoding="utf-8")
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    score(data, a)
    score(data, b, "--strictness", "1", "--probe-prompt", "angles")
    score(data, c)
    saved = json.loads(a.read_text(encoding="utf-8").splitlines()[0])["settings"]
    assert (saved["judge"], saved["strictness"], saved["language"]) == ("offline", 3, "auto")
    result, out = diff_json(a, b)
    assert out["settings_differ"] == {
        "probe_prompt": ["diverse", "angles"],
        "strictness": ["3", "1"],
    }
    warning = (
        "warning: A and B were scored with other settings (probe_prompt diverse vs angles; "
        "strictness 3 vs 1): the difference mixes their effect with the change"
    )
    assert result.stderr.strip() == warning  # --json: the warning on stderr, one line
    assert warning in invoke("diff", a, b).stdout
    result = invoke("diff", a, b, "--strict")
    assert result.exit_code == 2 and "--strict refuses to compare them" in result.output
    _, same = diff_json(a, c, "--strict")
    assert same["settings_differ"] == {} and "warning" not in invoke("diff", a, c).stdout


def test_a_small_overlap_warns_with_paired_and_whole_run_means(tmp_path):
    rows = run_rows()
    a = write(tmp_path / "a.jsonl", rows)
    others = [(f"Other {i}?", [0.1, 0.1, 0.1], {}) for i in range(30)]
    b = write(tmp_path / "b.jsonl", rows[:10] + others)
    result, out = diff_json(a, b)
    assert out["small_overlap"] is True and out["n_pairs"] == 10
    paired = statistics.fmean(sum(c) / 3 for _, c, _ in rows[:10])
    whole_b = statistics.fmean([paired] * 10 + [0.1] * 30)
    assert out["run_mean_b"] == pytest.approx(whole_b) and out["mean_b"] == pytest.approx(paired)
    text = invoke("diff", a, b).stdout
    assert (
        f"warning: only 10 of A's 40 rows and of B's 40 pair: whole runs mean A "
        f"{out['run_mean_a']:.4f}, B {whole_b:.4f}; the paired rows A {paired:.4f}, B {paired:.4f}"
    ) in text
    _, full = diff_json(a, a)
    assert full["small_overlap"] is False


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("score", "high", "row 3: score 'high' is not a number from -1 to 1"),
        ("score", 5.0, "row 3: score 5.0 is not a number from -1 to 1"),
        ("score", "0.9", "row 3: score '0.9' is not a number from -1 to 1"),
        ("score", True, "row 3: score True is not a number from -1 to 1"),
        ("score_stderr", -0.1, "row 3: score_stderr -0.1 is not a number from 0 to 1"),
        ("strictness", "3", "row 3: strictness '3' is not a whole number"),
        ("probes", [{"question": "q", "noncommittal": 0, "cosine": "x"}], "a probe's cosine 'x'"),
        ("probes", "none", "row 3: its fields are not those of a report line"),
        ("row", "x", "line 3: row 'x' is not a row"),
    ],
)
def test_a_damaged_report_is_one_line_naming_file_and_row(tmp_path, field, value, said):
    a = write(tmp_path / "a.jsonl", run_rows())
    lines = a.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[2])
    record[field] = value
    lines[2] = json.dumps(record)
    b = tmp_path / "b.jsonl"
    b.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for command in (["diff", a, b], ["show", b], ["plan", b, "--detect", "0.1"]):
        result = invoke(*command)
        assert result.exit_code == 2, result.output
        assert said in result.stderr and str(b) in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_the_verdict_lines_say_what_paired_each_test_its_side_and_what_exits_1(tmp_path):
    a, b = dropped_runs(tmp_path)
    _, out = diff_json(a, b)
    text = invoke("diff", a, b, "--top", "0").stdout
    lines = [line.strip() for line in text.splitlines()]
    assert (
        "paired by question text: 40 pair(s), 40 scored in both; only in A 0, only in B 0" in lines
    )
    assert "failed (NaN) in the pairs: only in A 0, only in B 0, in both 0" in lines
    assert (
        f"mean A {out['mean_a']:.4f} | mean B {out['mean_b']:.4f} | B - A {out['diff']:.4f} ± "
        f"{out['stderr']:.4f} (95% CI [{out['ci_low']:.4f}, {out['ci_high']:.4f}], t, 39 df) | "
        f"p < 1e-16 (two-sided) | correlation of paired scores {out['correlation']:.2f}"
    ) in lines
    assert (
        "scores: B is significantly lower than A (one-sided p < 1e-16; exit 1 under 0.025): exit 1"
        in lines
    )
    assert (
        "failures: no significant rise (exact McNemar, one-sided p = 1.0000; exit 1 under "
        f"{FAILURE_ALPHA})"
    ) in lines
    _, past = diff_json(a, b, "--margin", "0.07")
    text = invoke("diff", a, b, "--margin", "0.07", "--top", "0").stdout
    assert past["drop_p_value"] > 0.025 and not past["significant_drop"]
    assert (
        f"scores: no significant drop by more than 0.07 (one-sided p = {past['drop_p_value']:.4f}; "
        "exit 1 under 0.025)"
    ) in [line.strip() for line in text.splitlines()]


def tiles(page: str) -> dict[str, str]:
    """An HTML page's figures: what each is, and the figure (with its class, when marked)."""
    found = re.findall(r"<li><b( class=\"\w+\")?>([^<]*)</b><span>([^<]*)</span></li>", page)
    return {label: value + marked for marked, value, label in found}


def test_the_html_page_gives_each_figure_the_verdicts_and_the_rows_that_moved(tmp_path):
    rows = run_rows()
    a = write(tmp_path / "a.jsonl", rows)
    moved = hardest_failed([(q, [x - 0.05 for x in c], e) for q, c, e in rows], 0.1)
    moved[20] = (rows[20][0], [0.1, 0.1, 0.1], {})
    b = write(tmp_path / "b.jsonl", moved)
    page = tmp_path / "diff.html"
    result = invoke("diff", a, b, "--html", page, "--top", "2")
    _, out = diff_json(a, b)
    html = page.read_text(encoding="utf-8")
    assert tiles(html) == {
        "pairs": "36",
        "mean A": f"{out['mean_a']:.4f}",
        "mean B": f"{out['mean_b']:.4f}",
        "B - A ± standard error": f"{out['diff']:.4f} ± {out['stderr']:.4f}" + ' class="down"',
        "95% CI (t)": f"[{out['ci_low']:.4f}, {out['ci_high']:.4f}]",
        "two-sided": p_text(out["p_value"]).replace("<", "&lt;"),
        "failed only in A / only in B": "0 / 4",
        "only in A": "0",
        "only in B": "0",
    }
    assert f"wrote {page}" in result.stdout
    for line in invoke("diff", a, b, "--top", "0").stdout.splitlines()[2:]:
        assert f"<p>{line.strip().replace('&', '&amp;').replace('<', '&lt;')}</p>" in html
    first = (  # the row that moved most: row 21, from its base to 0.1
        f'<h3>rows 21/21 <span class="score down">{statistics.fmean(rows[20][1]):.4f} → 0.1000 '
    )
    assert first in html and html.count('<article class="card">') == 2
    assert "0.10</td>" in html and f"{rows[20][1][0]:.2f}</td>" in html  # both runs' probes


def test_the_verdicts_that_exit_1_print_red_and_warnings_yellow(tmp_path):
    rows = run_rows()
    a = write(tmp_path / "a.jsonl", rows)
    others = [(f"Other {i}?", [0.5, 0.5, 0.5], {}) for i in range(50)]
    b = write(tmp_path / "b.jsonl", hardest_failed(rows, 0.3) + others)
    text = CliRunner().invoke(app, ["diff", str(a), str(b)], env={"FORCE_COLOR": "1"}).stdout
    red, yellow = "\x1b[31m", "\x1b[33m"
    said = {re.sub(r"\x1b\[[\d;]*m", "", line): line for line in text.splitlines()}
    failures = next(k for k in said if k.startswith("failures:"))
    assert failures.endswith(": exit 1") and said[failures].startswith(red)
    warning = next(k for k in said if k.startswith("warning: only 40 of A's 40 rows"))
    assert said[warning].startswith(yellow)
    scores = next(k for k in said if k.startswith("scores:"))
    assert not said[scores].startswith((red, yellow))


def test_the_table_heads_each_run_and_shows_a_rows_response_and_probes_on_lines_of_their_own(
    tmp_path,
):
    rows = run_rows()
    a = write(tmp_path / "a.jsonl", rows)
    moved = list(rows)
    for i in (4, 9):  # two rows that drop alike: the one earlier in A comes first
        moved[i] = (rows[i][0], [x - 0.3 for x in rows[i][1]], {})
    b = write(tmp_path / "b.jsonl", list(reversed(moved)))
    text = invoke("diff", a, b, "--top", "1").stdout
    lines = [line.strip() for line in text.splitlines()]
    assert lines[:2] == [f"A: {a} (40 rows)", f"B: {b} (40 rows)"]
    assert any(line.startswith("5/36 ") for line in lines)  # A's row 5 is B's row 36
    assert not any(line.startswith("10/31 ") for line in lines)
    probes = [f"{x:.2f} Question 4? probe {k}" for k, x in enumerate(rows[4][1])]
    assert any(line.startswith("> A") for line in lines)  # the response, above its probes
    assert all(any(line.startswith(p) for line in lines) for p in probes)  # one line each


def test_a_clustered_comparison_and_repeated_questions_say_so(tmp_path):
    a = write(tmp_path / "a.jsonl", run_rows())
    b = write(tmp_path / "b.jsonl", run_rows(shift=-0.01))
    _, out = diff_json(a, b, "--cluster", "doc")
    text = invoke("diff", a, b, "--cluster", "doc", "--top", "0").stdout
    df = f"{out['df']:.1f}".removesuffix(".0")
    assert f"CR2 over 8 clusters, {df} df; under 30 clusters: a rough interval) |" in text
    rows = [("Same?", [0.2, 0.2], {}), ("Same?", [0.8, 0.8], {}), ("Other?", [0.5, 0.5], {})]
    twice = write(tmp_path / "twice.jsonl", rows)
    lines = [line.strip() for line in invoke("diff", twice, twice).stdout.splitlines()]
    assert (
        "1 question(s) appear more than once in a file: their rows pair in row order; "
        "--id COLUMN pairs them by an id"
    ) in lines


def test_the_page_and_the_table_keep_their_parts_apart_and_name_what_paired(tmp_path):
    rows = run_rows()
    a = write(tmp_path / "a.jsonl", rows)
    moved = [(q, [x - 0.01 * (i % 4) for x in c], e) for i, (q, c, e) in enumerate(rows)]
    b = write(tmp_path / "b.jsonl", moved)
    page = tmp_path / "diff.html"
    text = invoke("diff", a, b, "--id", "doc", "--top", "2", "--html", page).stdout
    html = page.read_text(encoding="utf-8")
    said = "paired by question text and input column 'doc': 40 pair(s)"
    assert said in text and f"<p>{said.replace(chr(39), '&#x27;')}" in html
    assert "<title>Answer relevancy: B against A</title>" in html
    assert "</p><p>" in html and "</article><article" in html and "</tr><tr>" in html
    assert (
        '<div class="q" dir="auto">Question ' in html and '<div class="probe" dir="auto">' in html
    )
    head = next(line for line in text.splitlines() if "rows A/B" in line)
    assert "A's probes" in head and "B's probes" in head
    shown = CliRunner().invoke(app, ["diff", str(a), str(b)], env={"FORCE_COLOR": "1"}).stdout
    assert "\x1b[2mmoved most (5):" in shown  # dim


def test_the_moved_table_colours_each_change_and_json_names_the_margin(tmp_path):
    rows = run_rows()
    a = write(tmp_path / "a.jsonl", rows)
    moved = list(rows)
    moved[3] = (rows[3][0], [0.1, 0.1, 0.1], {})  # a drop
    moved[7] = (rows[7][0], [0.95, 0.95, 0.95], {})  # a rise
    b = write(tmp_path / "b.jsonl", moved)
    shown = (
        CliRunner()
        .invoke(app, ["diff", str(a), str(b), "--top", "2"], env={"FORCE_COLOR": "1"})
        .stdout
    )
    head = next(line for line in shown.splitlines() if "rows A/B" in line)
    plain = re.sub(r"\x1b\[[\d;]*m", "", head).split()
    assert plain[:6] == ["rows", "A/B", "A", "B", "B", "-"] and plain[6] == "A"
    drop = statistics.fmean(rows[3][1])
    assert f"\x1b[31m{0.1 - drop:+.4f}" in shown  # red
    assert f"\x1b[32m{0.95 - statistics.fmean(rows[7][1]):+.4f}" in shown  # green
    assert "\x1b[1mQuestion 3?" in shown  # the question in bold
    _, out = diff_json(a, b, "--margin", "0.01")
    assert out["margin"] == 0.01 and out["paired_by"] == "question text"
    result = invoke("diff", a, b, "--id", "ticket")
    assert f"--id ticket: no row of {a} has that input column" in result.output
