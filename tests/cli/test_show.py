"""What a person reads after a run: ``show`` on a saved report, exit codes, ties, piped text."""

from __future__ import annotations

import io
import json
import math
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from common import ROOT
from typer.testing import CliRunner

from ragas_relevancy_ext.cli import app
from ragas_relevancy_ext.cli.errors import exit_code
from ragas_relevancy_ext.cli.output.console import TrimmedLines
from ragas_relevancy_ext.cli.stats import summarise
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge

OFFLINE = ["--embeddings", "hash"]


def invoke(*args: str | Path):
    return CliRunner().invoke(app, [str(a) for a in args])


def rows(n: int) -> list[dict[str, str]]:
    return [
        {
            "user_input": f"Where is order A{i}?",
            "response": f"Order A{i} shipped on {i} March. It arrives in two days.",
        }
        for i in range(1, n + 1)
    ]


def write_jsonl(path: Path, items: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in items), encoding="utf-8")
    return path


class FailsOnRefunds(PretendJudge):
    """The offline judge, except that it fails on answers about refunds."""

    async def agenerate(self, prompt, response_model):
        if "Refunds take" in str(prompt):
            raise ConnectionError("judge unreachable")
        return await super().agenerate(prompt, response_model)


@pytest.fixture
def saved(tmp_path) -> Path:
    """A report of four rows from ``score --out``: one scores 0, one is NaN."""
    data = rows(2) + [
        {"user_input": "Can I get a refund?", "response": "Refunds take 5 days."},
        {"user_input": "Is it waterproof?", "response": "I don't know, it depends."},
    ]
    path = write_jsonl(tmp_path / "rows.jsonl", data)
    out = tmp_path / "report.jsonl"
    from ragas_relevancy_ext.cli import setup as runner
    from ragas_relevancy_ext.cli.providers import Built, Spec

    patch = pytest.MonkeyPatch()
    patch.setattr(
        runner, "build_judge", lambda *a, **k: Built(FailsOnRefunds(), "offline", Spec("offline"))
    )
    try:
        result = invoke("score", path, *OFFLINE, "--out", out)
    finally:
        patch.undo()
    assert result.exit_code == 3, result.output  # some rows NaN: exit 3, not 0
    return out


def test_show_prints_the_saved_table_and_summary(saved):
    result = invoke("show", saved)
    assert result.exit_code == 3  # as the run's: one row not scored
    out = result.stdout
    assert f"report: {saved} (4 row(s))" in out and "judge: offline" in out
    assert "showing: all 4 row(s)" in out
    assert "Where is order A1?" in out and "Order A1 shipped on 1 March?" in out
    assert "4 sample(s), 3 scored" in out and "NaN: 1 (unreachable 1)" in out
    assert "Not scored (unreachable): the judge could not be reached: ConnectionError: judge" in out
    assert "row    4  0.0000  Is it waterproof?  (every probe flagged noncommittal)" in out


def test_show_one_row_with_its_reason(saved):
    result = invoke("show", saved, "--row", "2")
    assert result.exit_code == 3
    words = " ".join(result.stdout.split())
    assert "showing: row 2" in words and "Where is order A2?" in words
    assert "Where is order A1?" not in words
    records = [json.loads(line) for line in saved.read_text(encoding="utf-8").splitlines()]
    score = next(r["score"] for r in records if r["row"] == 2)
    assert f"Score {score:.2f} is the average similarity (1 = same meaning) between" in words
    missing = invoke("show", saved, "--row", "9")
    assert missing.exit_code == 2 and "no row 9 (rows 1-4)" in missing.stderr
    both = invoke("show", saved, "--row", "2", "--worst", "3")
    assert both.exit_code == 2 and "give --row or --worst, not both" in both.stderr


def test_show_worst_lists_nan_first_then_lowest(saved):
    result = invoke("show", saved, "--worst", "2")
    out = result.stdout
    assert "showing: the 2 lowest of 4 row(s), NaN first" in out
    assert out.index("Can I get a refund?") < out.index("Is it waterproof?")
    assert "Where is order A1?" not in out.split("sample(s)")[0]
    assert "Score 0: the judge flagged all 3 probe questions as noncommittal" in " ".join(
        out.split()
    )


def test_show_rejects_a_file_that_is_not_a_report(tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_text('{"row": 1, "user_input": "Q?", "score": 0.5}\nhello\n', encoding="utf-8")
    result = invoke("show", path)
    assert result.exit_code == 2 and "line 2 is not a report line" in result.stderr
    assert invoke("show", tmp_path / "none.jsonl").exit_code == 2


@pytest.mark.slow
def test_show_never_imports_ragas(saved):
    command = [sys.executable, "-X", "importtime", "-m", "ragas_relevancy_ext", "show", saved]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 3, done.stderr
    assert "4 sample(s), 3 scored" in done.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert sorted(m for m in imported if m.split(".")[0] in {"ragas", "openai", "torch"}) == []


# -- one exit-code rule ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scored", "total", "code"), [(4, 4, 0), (0, 4, 1), (0, 0, 1), (3, 4, 3), (1, 4, 3)]
)
def test_exit_code_rule(scored, total, code):
    assert exit_code(scored, total) == code


@pytest.mark.slow
def test_gemini_example_follows_the_same_rule(capsys):
    from ragas_relevancy_ext import AnswerRelevancy

    example = runpy.run_path(str(ROOT / "examples" / "gemini_adapter.py"))
    run = example["score_and_print"]
    samples = example["SAMPLES"]

    def metric(judge):
        return AnswerRelevancy(llm=judge, embeddings=HashEmbeddings(), strictness=2)

    class Down(PretendJudge):
        async def agenerate(self, prompt, response_model):
            raise ConnectionError("judge unreachable")

    class DownOnE42(PretendJudge):
        async def agenerate(self, prompt, response_model):
            if "unable to find" in str(prompt):
                raise ConnectionError("judge unreachable")
            return await super().agenerate(prompt, response_model)

    assert run(metric(PretendJudge()), samples) == 0
    assert run(metric(Down()), samples) == 1  # every sample failed: not 0
    assert run(metric(DownOnE42()), samples) == 3
    assert "1 of 2 samples not scored" in capsys.readouterr().err


# -- the lowest rows and their ties ------------------------------------------------------------


def test_lowest_says_how_many_more_are_tied():
    items = [(n, 0.0 if n <= 7 else n / 10, f"q{n}") for n in range(1, 10)]
    summary = summarise(items)
    assert [low.number for low in summary.lowest] == [1, 2, 3, 4, 5]
    assert summary.tied == 2
    assert summary.lowest_title() == "lowest 5 (2 more tied at 0.0000 not shown)"
    plain = summarise([(n, n / 10, "q") for n in range(1, 9)])
    assert plain.tied == 0 and plain.lowest_title() == "lowest 5"
    assert summarise([(1, math.nan, "q")]).lowest_title() == "lowest 0"


def test_piped_lines_carry_no_trailing_spaces():
    sink = io.StringIO()
    stream = TrimmedLines(sink)
    stream.write("a   \nb  ")
    stream.write("c   \n")
    stream.write("tail")
    stream.flush()
    assert sink.getvalue() == "a\nb  c\ntail"  # only the ends of lines


def test_the_table_marks_the_probe_that_pulled_the_score_down():
    from ragas_relevancy_ext.scoring.report import Probe, RelevancyReport

    report = RelevancyReport(
        "Where is A17?",
        "It shipped.",
        0.55,
        2,
        "diverse",
        False,
        [Probe("Where is A17?", 0, 0.9), Probe("Do you sell cats?", 1, 0.2)],
        distinct_probes=2,
    )
    lines = table_lines([(7, report)], reasons=True)
    assert lines[3] == f"{' ' * 17}0.90   Where is A17?"
    assert lines[4] == f"{' ' * 17}0.20   Do you sell cats?  nc  pulled the score down by 0.35"
    assert lines[5] == " " * 24 + report.reason  # the reason beneath the probes, whole
    assert 'The probe "Do you sell cats?" (similarity 0.20) pulled it down by 0.35.' in lines[5]


# -- the per-row table: styled lines, not rich's per-cell layout -----------------------------

TABLE_HEAD = "question, response (>), probes (nc = noncommittal)"


def odd_reports():
    """Reports whose cells test the layout: negative and NaN scores, tabs, newlines, wide
    characters, words longer than a line, notes, reasons, a bidi control."""
    from ragas_relevancy_ext.scoring.report import Probe, RelevancyReport

    url = "https://example.com/" + "very-long-path-segment-" * 6
    return [
        (1, RelevancyReport("Where is A17?", "It shipped.", 0.55, 2, "diverse", False,
                            [Probe("Where is A17?", 0, 0.9, "en"),
                             Probe("Do you sell cats?", 1, 0.2, "en")], distinct_probes=2)),
        (22, RelevancyReport("返品はできますか？" * 4, "はい、" * 30, -0.0123, 1, "diverse", False,
                             [Probe("Return\tpolicy?\nSecond line of the probe", 0, -0.05, "ja")],
                             notes=["a note on\ttabs"], question_language="ja")),
        (333, RelevancyReport("Is it \u202ewaterproof?", url, float("nan"), 3, "stock", False,
                              error="TimeoutError: judge took too long")),
        (4444, RelevancyReport("Can I pay later?", "I don't know.", 0.0, 2, "diverse", True,
                               [Probe("Pay later?", 1, 0.7), Probe("Later?", 1, 0.6)])),
    ]  # fmt: skip


def table_lines(items, terminal: bool = False, **options) -> list[str]:
    """:func:`print_scores` of ``items`` as a console piped (or a terminal's) prints it."""
    from rich.console import Console

    from ragas_relevancy_ext.cli.output.console import print_scores

    sink = io.StringIO()
    console = Console(file=sink, width=80, force_terminal=terminal, highlight=False, markup=False)
    print_scores(console, items, rows=max(n for n, _ in items), **options)
    return sink.getvalue().splitlines()


def test_every_cell_is_whole_in_the_table_s_columns():
    lines = table_lines(odd_reports(), reasons=True)
    assert lines[0] == f" row    score   cosine   {TABLE_HEAD}"
    assert lines[1] == "   1   0.5500            Where is A17?"
    url = "https://example.com/" + "very-long-path-segment-" * 6
    assert f"{' ' * 25}> {url}" in lines  # never cut: the terminal folds it
    assert f"{' ' * 25}Second line of the probe" in lines  # a newline in a cell
    assert f"{' ' * 17}-0.05   Return  policy?" in lines  # tabs expanded
    assert f"{' ' * 25}note: a note on tabs" in lines
    assert " 333      NaN            Is it <U+202E>waterproof?" in lines  # controls as codes
    assert lines[lines.index("4444   0.0000            Can I pay later?") - 1] == ""


def count_rich_tables(monkeypatch) -> list[int]:
    from rich.table import Table

    rendered = [0]
    real = Table.__rich_console__

    def counting(self, console, options):
        rendered[0] += 1
        return real(self, console, options)

    monkeypatch.setattr(Table, "__rich_console__", counting)
    return rendered


def test_a_terminal_gets_the_piped_text_in_colours(monkeypatch):
    rendered = count_rich_tables(monkeypatch)
    piped = table_lines(odd_reports(), reasons=True)
    coloured = table_lines(odd_reports(), terminal=True, reasons=True)
    assert rendered == [0]
    assert "\x1b[" not in "".join(piped)
    assert "\x1b[31m   NaN\x1b[0m" in "".join(coloured)  # a row not scored, in red
    assert [re.sub(r"\x1b\[[0-9;]*m", "", line).rstrip() for line in coloured] == piped


def test_show_prints_a_big_report_without_rich_tables_and_no_table_on_request(
    tmp_path, monkeypatch
):
    from ragas_relevancy_ext.cli.output.jsonl import report_line

    reports = [r for _, r in odd_reports()] * 60
    path = tmp_path / "big.jsonl"
    path.write_text(
        "".join(
            report_line(n, f"key{n}", r, "offline", "hash", line=n)
            for n, r in enumerate(reports, 1)
        ),
        encoding="utf-8",
    )
    rendered = count_rich_tables(monkeypatch)
    shown = invoke("show", path)
    assert rendered == [0]
    firsts = re.findall(r"^ *\d+   0\.5500            Where is A17\?$", shown.stdout, re.M)
    assert len(firsts) == 60 and TABLE_HEAD in shown.stdout  # every row's first line
    assert "240 sample(s), 180 scored" in shown.stdout
    summary_only = invoke("show", path, "--no-table")
    assert TABLE_HEAD not in summary_only.stdout and "Where is A17?" not in summary_only.stdout
    assert "240 sample(s), 180 scored" in summary_only.stdout
    assert summary_only.exit_code == shown.exit_code == 3


def test_score_prints_the_table_automatically_or_as_asked(tmp_path, monkeypatch):
    import importlib

    score_command = importlib.import_module("ragas_relevancy_ext.cli.score")
    path = write_jsonl(tmp_path / "rows.jsonl", rows(3))
    out = tmp_path / "report.jsonl"

    def run(*flags: str) -> str:
        result = invoke("score", path, *OFFLINE, "--out", out, *flags)
        assert result.exit_code == 0, result.output
        assert "3 sample(s), 3 scored" in result.stdout  # the summary, always
        return result.stdout

    def has_table(text: str) -> bool:
        return TABLE_HEAD in text and all(f"Where is order A{i}?" in text for i in (1, 2, 3))

    assert has_table(run()) and has_table(run("--table"))
    assert not has_table(run("--no-table")) and "per-row table" not in run("--no-table")
    monkeypatch.setattr(score_command, "TABLE_ROWS", 2)  # a run bigger than the limit
    automatic = run()
    assert not has_table(automatic)
    assert "(3 rows: the per-row table is printed up to 2, or with --table;" in automatic
    assert has_table(run("--table"))
    assert not has_table(run("--no-table")) and "per-row table" not in run("--no-table")


def test_the_ray_engine_refuses_table_rather_than_ignore_it(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", rows(2))
    out = tmp_path / "report.jsonl"
    refused = invoke("score", path, *OFFLINE, "--engine", "ray", "--out", out, "--table")
    assert refused.exit_code == 2
    assert "--table needs --engine local" in refused.stderr
    assert not out.exists()  # refused before anything was written
