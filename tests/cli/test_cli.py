"""The ``ragas-relevancy`` command run as a user would: help, score, compare, calibrate."""

from __future__ import annotations

import inspect
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from common import ROOT
from typer.testing import CliRunner

from ragas_relevancy_ext.cli import app

EXAMPLE = ROOT / "examples" / "support_qa.jsonl"
SECRET = "sk-test-DO-NOT-PRINT-0123456789"
HEAVY = frozenset({"ragas", "numpy", "openai", "torch"})
OFFLINE = ["--embeddings", "hash"]


def invoke(*args: str | Path, env: dict[str, str | None] | None = None):
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows),
        encoding="utf-8",
    )
    return path


def some_rows(n: int) -> list[dict[str, str]]:
    topics = ["order A17", "a refund", "the warranty", "card payments", "delivery", "returns"]
    return [
        {
            "user_input": f"What about {topics[i % len(topics)]} ({i})?",
            "response": f"Here is what we know about {topics[i % len(topics)]}: it is handled.",
        }
        for i in range(n)
    ]


# -- help and start-up ------------------------------------------------------------------------


def imported_modules(*args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``python -X importtime -m ragas_relevancy_ext ARGS``; the modules it imported."""
    command = [sys.executable, "-X", "importtime", "-m", "ragas_relevancy_ext", *args]
    env = {**os.environ, "COLUMNS": "80"}
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    return done, {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}


def heavy(modules: set[str], names: frozenset[str] = HEAVY) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in names)


@pytest.mark.slow
def test_help_imports_no_heavy_module():
    # how long --help takes is measured by benchmarks/startup.py, never asserted here
    done, imported = imported_modules("score", "--help")
    assert done.returncode == 0, done.stderr
    assert "--judge" in done.stdout and "--one-text-per-call" in done.stdout
    assert heavy(imported) == []


@pytest.mark.parametrize(
    "command", [[], ["score"], ["show"], ["compare"], ["calibrate"], ["diff"], ["plan"]]
)
def test_help_fits_80_columns_with_nothing_cut(command):
    result = CliRunner().invoke(app, [*command, "--help"], terminal_width=80, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in result.stdout and "..." not in result.stdout.replace("[ARGS]...", "")
    assert "<bool>" not in result.stdout and "<str>" not in result.stdout
    if command == ["score"]:
        for name in ("--embeddings-base-url", "--one-text-per-call", "--map COLUMN=FIELD"):
            assert name in result.stdout
        words = " ".join(result.stdout.split())
        assert "e.g. --map question=user_input." in words
        assert "max_concurrency). [default: 16; x>=1]" in words  # --concurrency


def test_version_says_which_package_and_ragas():
    from importlib.metadata import version

    from ragas_relevancy_ext import __version__

    result = invoke("--version")
    assert result.exit_code == 0
    ragas = version("ragas")
    assert result.stdout.startswith(f"ragas-relevancy-ext {__version__} (ragas {ragas}, Python 3.")


def test_cli_and_api_share_one_concurrency_default():
    from ragas_relevancy_ext import AnswerRelevancy
    from ragas_relevancy_ext.cli.setup import Settings

    default = inspect.signature(AnswerRelevancy.__init__).parameters["max_concurrency"].default
    assert Settings().concurrency == default == 16


@pytest.mark.slow
def test_python_dash_m_scores_the_example_offline():
    command = [sys.executable, "-m", "ragas_relevancy_ext", "score", str(EXAMPLE), *OFFLINE]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "judge: offline" in done.stdout and "embeddings: hash" in done.stdout
    assert "36 sample(s), 36 scored" in done.stdout
    assert "Traceback" not in done.stderr


# -- score ------------------------------------------------------------------------------------


def test_score_shows_every_probe_and_a_summary():
    result = invoke("score", EXAMPLE, *OFFLINE, "--probe-prompt", "stock", "--strictness", "2")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "probes: stock prompt, strictness 2" in out
    assert "Where is my order #48213? It was supposed to arrive yesterday." in out
    assert "Order #48213 left our warehouse on Monday and is with the courier now?" in out
    assert "mean" in out and "median" in out and "score 0:" in out and "NaN: 0" in out
    # seven rows score 0 (every probe noncommittal): five are listed, the other two counted
    assert "score 0: 7 |" in out and "lowest 5 (2 more tied at 0.0000 not shown):" in out
    assert "caution: the offline judge makes each probe from the answer's first sentence" in out
    assert not [line for line in out.splitlines() if line.endswith(" ")]  # piped: not padded


def test_score_reads_csv_with_renamed_columns(tmp_path):
    path = tmp_path / "qa.csv"
    path.write_text(
        'question,answer\n"Where is order A17?","Order A17 shipped on 3 March."\n', encoding="utf-8"
    )
    result = invoke(
        "score", path, *OFFLINE, "--map", "question=user_input", "-m", "answer=response"
    )
    assert result.exit_code == 0, result.output
    assert "Order A17 shipped on 3 March?" in result.stdout


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        (None, [], "no such file"),
        (b'{"user_input": "caf\xe9", "response": "x"}\n', [], "not UTF-8"),
        (b'{"question": "Q?", "answer": "A."}\n', [], "no 'user_input' column"),
        (b"\n\n", [], "no rows"),
        (b'{"user_input": "Q?", "response": "A."}\n', ["--map", "oops"], "--map"),
        (b'{"user_input": "Q?", "response": "A."}\n', ["--judge", "claude"], "--judge 'claude'"),
        (b'{"user_input": "Q?", "response": "A."}\n', ["--judge", "openai"], "openai:MODEL"),
        (b'{"user_input": "Q?", "response": "A."}\n', ["--embeddings", "hash:x"], "'hash:x'"),
    ],
)
def test_bad_files_and_settings_give_one_line_and_exit_2(tmp_path, content, args, message):
    path = tmp_path / "rows.jsonl"
    if content is not None:
        path.write_bytes(content)
    result = invoke("score", path, *OFFLINE, *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_the_embeddings_label_says_one_text_per_call_once():
    from ragas_relevancy_ext.cli.setup import Settings, check_settings

    def label(**settings: object) -> str:
        return check_settings(Settings(one_text_per_call=True, **settings)).embeddings_label

    assert label(embeddings="hash").endswith("offline), one text per call")
    local = "http://127.0.0.1:9/v1"  # a local server needs no key
    gemini = label(embeddings="gemini:m", embeddings_base_url=local)  # one text a call already
    assert gemini == f"gemini:m at {local}, one text per call"
    assert label(embeddings="openai:m", embeddings_base_url=local).endswith(", one text per call")


def test_good_rows_are_scored_and_bad_ones_listed_by_line(tmp_path):
    rows = some_rows(2)
    path = write_jsonl(
        tmp_path / "rows.jsonl", [rows[0], "{not json", {"user_input": "Q?"}, rows[1]]
    )
    result = invoke("score", path, *OFFLINE)
    assert result.exit_code == 3, result.output  # some rows skipped
    assert "4 sample(s), 2 scored" in result.stdout  # every input row is in the output
    assert "skipped 2 bad row(s)" in result.stderr
    assert "line 2: not valid JSON" in result.stderr and "line 3: no response" in result.stderr


def test_out_is_written_per_sample_and_a_rerun_scores_only_the_rest(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(5))
    out = tmp_path / "report.jsonl"
    assert invoke("score", path, *OFFLINE, "--out", out).exit_code == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 5

    # as if the run had stopped after two rows, in the middle of writing the third
    out.write_text("\n".join(lines[:2]) + "\n" + lines[2][:40], encoding="utf-8")
    result = invoke("score", path, *OFFLINE, "--out", out)
    assert result.exit_code == 0, result.output
    assert "2 row(s) already there, 3 to score" in result.stdout
    assert "5 sample(s), 5 scored" in result.stdout
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(r["row"] for r in records) == [1, 2, 3, 4, 5]
    assert all(r["judge"].startswith("offline") for r in records)

    # an edited row is scored again; the others are skipped
    rows = some_rows(5)
    rows[4]["response"] = "Something else entirely."
    write_jsonl(path, rows)
    result = invoke("score", path, *OFFLINE, "--out", out)
    assert "4 row(s) already there, 1 to score" in result.stdout


def test_html_report_keeps_hostile_text_inert(tmp_path):
    hostile = {
        "user_input": "What does <script>alert(1)</script> do?",
        "response": "It runs <img src=x onerror=alert(2)>. Nothing else.",
    }
    path = write_jsonl(tmp_path / "rows.jsonl", [hostile, *some_rows(2)])
    page_path = tmp_path / "report.html"
    result = invoke("score", path, *OFFLINE, "--html", page_path)
    assert result.exit_code == 0, result.output
    page = page_path.read_text(encoding="utf-8")
    assert "<script" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<svg" in page and page.count('<article class="card') == 3


def test_cache_makes_a_rerun_ask_the_judge_nothing(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(3))
    cache = tmp_path / "cache"
    first = invoke("score", path, *OFFLINE, "--probe-prompt", "stock", "--cache", cache)
    assert "0 replies reused, 9 judge calls" in first.stdout
    again = invoke("score", path, *OFFLINE, "--probe-prompt", "stock", "--cache", cache)
    assert "9 replies reused, 0 judge calls" in again.stdout


# -- judges, keys -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "variable"),
    [
        (["--judge", "openai:gpt-4o-mini"], "OPENAI_API_KEY"),
        (["--judge", "gemini:gemini-2.5-flash"], "GEMINI_API_KEY or GOOGLE_API_KEY"),
        (["--embeddings", "gemini:gemini-embedding-2"], "GEMINI_API_KEY or GOOGLE_API_KEY"),
    ],
)
def test_missing_key_names_the_variable(args, variable):
    env = {"OPENAI_API_KEY": None, "GEMINI_API_KEY": None, "GOOGLE_API_KEY": None}
    result = invoke("score", EXAMPLE, *OFFLINE, *args, env=env)
    assert result.exit_code == 2
    assert f"set {variable}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_an_api_key_is_never_printed_or_written(tmp_path, monkeypatch):
    from ragas_relevancy_ext.cli import setup as runner
    from ragas_relevancy_ext.cli.providers import Built, Spec
    from ragas_relevancy_ext.testing.offline import PretendJudge

    class Rejecting(PretendJudge):
        async def agenerate(self, prompt, response_model):
            raise PermissionError(f"401 Incorrect API key provided: {SECRET}")

    with monkeypatch.context() as patch:
        patch.setattr(
            runner,
            "build_judge",
            lambda *a, **k: Built(Rejecting(), "openai:x", Spec("openai", "x")),
        )
        out, page = tmp_path / "out.jsonl", tmp_path / "out.html"
        path = write_jsonl(tmp_path / "rows.jsonl", some_rows(2))
        result = invoke(
            "score", path, *OFFLINE, "--out", out, "--html", page, env={"OPENAI_API_KEY": SECRET}
        )
    assert result.exit_code == 1  # nothing could be scored
    assert "Incorrect API key provided: ***" in result.stdout
    for text in (result.stdout, result.stderr, out.read_text(), page.read_text()):
        assert SECRET not in text

    # failed rows are not "done": a re-run tries them again, and its lines win
    again = invoke("score", path, *OFFLINE, "--out", out)
    assert "0 row(s) already there, 2 to score, 2 of them failed before" in again.stdout
    assert "warning" not in again.stderr
    final = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["row"], r["error"]) for r in final] == [(1, None), (2, None)]  # replaced
    third = invoke("score", path, *OFFLINE, "--out", out)
    assert "2 row(s) already there, 0 to score" in third.stdout
    other = invoke(
        "score",
        path,
        "--embeddings",
        "hash",
        "--judge",
        "offline",
        "--out",
        out,
        "--strictness",
        "2",
    )
    # a setting that changes the score: the rows are scored again, not mixed
    assert "0 row(s) already there, 2 to score" in other.stdout
    assert "2 line(s) in" in other.stderr and "replaced" in other.stderr
    assert [json.loads(line)["strictness"] for line in out.read_text().splitlines()] == [2, 2]


@pytest.mark.slow
@pytest.mark.parametrize("batching", ["--batch-embeddings", "--no-batch-embeddings"])
def test_openai_judge_and_embeddings_against_a_local_server(tmp_path, batching):
    from ragas_relevancy_ext.testing.loopback import LoopbackServer

    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(2))
    with LoopbackServer() as server:
        base_url = server.openai_base_url
        result = invoke(
            "score",
            path,
            "--judge",
            "openai:loop-judge",
            "--base-url",
            base_url,
            "--embeddings",
            "openai:loop-embed",
            "--max-retries",
            "0",
            batching,
            env={"OPENAI_API_KEY": None},  # a server on this machine needs no key
        )
        counts = server.counts
        texts = sorted(len(r.texts) for r in server.requests("embeddings"))
    assert result.exit_code == 0, result.output
    assert f"judge: openai:loop-judge at {base_url}" in result.stdout
    assert "2 sample(s), 2 scored" in result.stdout
    # diverse: one judge call per sample; off, question and probes in two calls, as stock;
    # on, the two samples' questions and probes share requests (one each when they meet)
    assert counts["chat"] == 2
    if batching == "--no-batch-embeddings":
        assert counts["embeddings"] == 4 and texts == [1, 1, 3, 3]
    else:
        assert counts["embeddings"] <= 4 and sum(texts) == 8


@pytest.mark.slow
def test_a_row_not_scored_is_logged_once_at_warning_with_its_cause(tmp_path, caplog):
    from ragas_relevancy_ext.testing.loopback import LoopbackServer, pretend_reply

    rows = some_rows(3)
    rows[1]["response"] = "GARBLED " + rows[1]["response"]

    def reply(messages: list[dict[str, object]]) -> str:  # the judge garbles one row's replies
        return "not json at all" if "GARBLED" in str(messages) else pretend_reply(messages)

    path = write_jsonl(tmp_path / "rows.jsonl", rows)
    with LoopbackServer(reply=reply) as server, caplog.at_level(logging.WARNING):
        args = ["--base-url", server.openai_base_url, "--embeddings", "openai:loop-embed"]
        result = invoke("score", path, "--judge", "openai:loop-judge", *args)
    assert "3 sample(s), 2 scored" in result.stdout
    mine = [r for r in caplog.records if r.name == "ragas_relevancy_ext"]
    assert [(r.levelname, r.getMessage().partition(": ")[0]) for r in mine] == [
        ("WARNING", "row 2 not scored (no_usable_probe)")
    ]


# -- compare and calibrate --------------------------------------------------------------------


def test_compare_matches_stock_offline():
    result = invoke("compare", EXAMPLE, *OFFLINE)
    assert result.exit_code == 0, result.output
    assert "0 beyond tolerance" in result.stdout


def compare_rows_of(stdout: str) -> dict[int, list[str]]:
    """The compare table's first line of each row, by row number, as its cells."""
    cells: dict[int, list[str]] = {}
    for line in stdout.splitlines():
        words = line.split()
        if words and words[0].isdigit() and len(words) > 6 and words[4] in ("yes", "no"):
            cells[int(words[0])] = words
    return cells


@pytest.mark.parametrize("mode", ["diverse", "angles"])
def test_compare_shows_the_parity_check_and_the_scores_of_the_mode_asked(tmp_path, mode):
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(3))
    options = () if mode == "diverse" else ("--ours", mode)
    result = invoke("compare", path, *OFFLINE, *options, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    head = result.stdout.split("─")[0].splitlines()[-2:]  # the two header lines, whole
    assert head[0].split() == ["ours", "in", "|stock", "same", "ours", "in"]
    assert head[1].split() == ["row", "stock", "stock", "mode", "-", "ours|", "prompts", mode,
                               "question"]  # fmt: skip
    out = tmp_path / "scored.jsonl"
    scored = invoke("score", path, *OFFLINE, "--probe-prompt", mode, "--out", out)
    assert scored.exit_code == 0, scored.output
    scores = {r["row"]: r["score"] for r in map(json.loads, out.read_text().splitlines())}
    table = compare_rows_of(result.stdout)
    assert sorted(table) == [1, 2, 3]
    for number, words in table.items():
        stock, parity, mode_score = words[1], words[2], words[5]
        assert stock == parity  # stock mode: the parity check
        assert mode_score == f"{scores[number]:.4f}"  # what score gives in that mode


def test_compare_s_cost_table_headers_are_whole_at_80_columns(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(2))
    result = invoke("compare", path, *OFFLINE, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    cost = result.stdout.split("what each costs")[1]
    assert "…" not in cost.split("stock usage")[0]
    assert "all   diverse" in cost and "all   stock" in cost


def test_compare_exits_1_when_ours_differs(monkeypatch, tmp_path):
    from ragas_relevancy_ext import parity
    from ragas_relevancy_ext.scoring.report import RelevancyReport

    async def drifting(judge, embeddings, user_input, response, strictness=3, **options):
        report = RelevancyReport(user_input, response, 0.6, strictness, "stock", False)
        return parity.ParityResult(0.5, 0.6, True, report)

    monkeypatch.setattr(parity, "compare_with_stock", drifting)
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(2))
    result = invoke("compare", path, *OFFLINE)
    assert result.exit_code == 1
    assert "2 beyond tolerance" in result.stdout
    assert invoke("compare", path, *OFFLINE, "--tol", "0.2").exit_code == 0


def test_compare_keeps_stocks_requests_and_ours_to_the_limits_given(monkeypatch, tmp_path):
    from ragas_relevancy_ext.run.limits import KeyLimit

    waited: list[tuple[str, float | None]] = []
    wait = KeyLimit.wait

    async def counted(self: KeyLimit, tokens: int) -> int:
        waited.append((self.name, self.rpm))
        return await wait(self, tokens)

    monkeypatch.setattr(KeyLimit, "wait", counted)
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(2))
    assert invoke("compare", path, *OFFLINE, "--rpm", "6000").exit_code == 0
    judge = [rpm for name, rpm in waited if "/chat/completions" in name]
    # stock's 3 calls a row and ours' 1 (diverse); the replay of stock's replies asks no one
    assert judge == [6000] * 2 * (3 + 1)
    assert len(waited) > len(judge)  # the embeddings', stock's included


def test_calibrate_reports_correlations_with_intervals():
    result = invoke("calibrate", EXAMPLE, "--ratings", "rating", *OFFLINE)
    assert result.exit_code == 0, result.output
    assert "Pearson" in result.stdout and "Spearman" in result.stdout
    assert "n = 36 pair(s)" in result.stdout and "2000 resamples" in result.stdout


def test_calibrate_repeats_report_the_spread(tmp_path):
    path = write_jsonl(
        tmp_path / "rows.jsonl",
        [{**row, "rating": i % 5 + 1} for i, row in enumerate(some_rows(4))],
    )
    result = invoke(
        "calibrate", path, "--ratings", "rating", *OFFLINE, "--repeats", "2", "--cache", tmp_path
    )
    assert result.exit_code == 0, result.output
    assert "2 per sample, judge cache off (--cache ignored)" in result.stdout
    assert "mean standard deviation over 2 repeats: 0.0000" in result.stdout
    assert (
        "std is 0 for every sample because the offline judge is deterministic: it writes the "
        "same probes every time" in " ".join(result.stdout.split())
    )
    assert "only 4 pairs" in result.stdout


def test_calibrate_lists_rows_without_a_rating(tmp_path):
    rows = [{**row, "rating": 3} for row in some_rows(3)]
    rows[1]["rating"] = "n/a"
    path = write_jsonl(tmp_path / "rows.jsonl", rows)
    result = invoke("calibrate", path, "--ratings", "rating", *OFFLINE)
    assert result.exit_code == 3, result.output  # one row skipped
    assert "line 2: rating is 'n/a', not a number" in result.stderr
    missing = invoke("calibrate", path, "--ratings", "stars", *OFFLINE)
    assert missing.exit_code == 2 and "no 'stars' column" in missing.stderr


# -- examples ---------------------------------------------------------------------------------


def test_example_data_has_rated_pairs_of_every_kind():
    rows = [json.loads(line) for line in EXAMPLE.read_text(encoding="utf-8").splitlines()]
    assert len(rows) >= 30
    assert {r["kind"] for r in rows} == {"on-topic", "off-topic", "evasive", "padded", "incomplete"}
    assert {r["source"] for r in rows} == {"support", "docs"}
    assert {r["rating"] for r in rows} <= {1, 2, 3, 4, 5}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "expected"),
    [("drop_in.py", "cosine  nc  probe"), ("in_evaluate.py", "weakest probe per row")],
)
def test_offline_examples_run(script, expected, capsys):
    import runpy

    runpy.run_path(str(ROOT / "examples" / script), run_name="__main__")
    assert expected in capsys.readouterr().out


@pytest.mark.slow
def test_gemini_example_says_it_needs_a_key():
    env = {k: v for k, v in os.environ.items() if k not in {"GEMINI_API_KEY", "GOOGLE_API_KEY"}}
    command = [sys.executable, str(ROOT / "examples" / "gemini_adapter.py")]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2
    assert "GEMINI_API_KEY" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_command_line_script_is_valid_bash():
    done = subprocess.run(["bash", "-n", str(ROOT / "examples" / "command_line.sh")], timeout=30)
    assert done.returncode == 0


# -- analytics --------------------------------------------------------------------------------


@pytest.mark.parametrize(("flags", "expected"), [((), "true"), (("--analytics",), None)])
def test_the_command_turns_ragas_analytics_off_for_itself_unless_asked(
    tmp_path, monkeypatch, flags, expected
):
    import importlib

    score_command = importlib.import_module("ragas_relevancy_ext.cli.score")
    seen = []
    real_prepare = score_command.prepare

    def prepare(settings, *args):  # the judge is built here, before any judge call
        seen.append(os.environ.get("RAGAS_DO_NOT_TRACK"))
        return real_prepare(settings, *args)

    monkeypatch.setattr(score_command, "prepare", prepare)
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(2))
    done = invoke("score", path, *OFFLINE, *flags, env={"RAGAS_DO_NOT_TRACK": None})
    assert done.exit_code == 0, done.output
    assert seen == [expected]


def test_the_library_leaves_the_analytics_setting_alone(monkeypatch):
    from ragas_relevancy_ext import AnswerRelevancy
    from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge

    monkeypatch.delenv("RAGAS_DO_NOT_TRACK", raising=False)
    metric = AnswerRelevancy(PretendJudge(), HashEmbeddings(64))
    assert metric.score(user_input="Where is order A17?", response="It shipped.").value > -1
    assert "RAGAS_DO_NOT_TRACK" not in os.environ


def test_help_says_analytics_are_off_by_default():
    done = invoke("score", "--help", env={"COLUMNS": "200"})
    assert "--analytics" in done.output and "RAGAS_DO_NOT_TRACK=true" in done.output


# -- model threads ----------------------------------------------------------------------------


def test_model_threads_leave_a_core_to_the_event_loop_unless_the_user_set_them():
    from ragas_relevancy_ext.cli.options import THREAD_VARIABLES, model_threads_for_this_process

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    environ: dict[str, str] = {}
    assert model_threads_for_this_process(environ) == max(1, cores - 1)
    assert environ == {name: str(max(1, cores - 1)) for name in THREAD_VARIABLES}
    for name in THREAD_VARIABLES:
        given = {name: "3"}
        assert model_threads_for_this_process(given) is None
        assert given == {name: "3"}  # what the user set is left as it is


def test_the_command_sets_model_threads_before_anything_loads(tmp_path, monkeypatch):
    import importlib

    score_command = importlib.import_module("ragas_relevancy_ext.cli.score")
    seen = []
    real_prepare = score_command.prepare

    def prepare(settings, *args):  # torch loads here, with the embeddings
        seen.append(os.environ.get("OMP_NUM_THREADS"))
        return real_prepare(settings, *args)

    monkeypatch.setattr(score_command, "prepare", prepare)
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(2))
    unset = {"OMP_NUM_THREADS": None, "MKL_NUM_THREADS": None}
    assert invoke("score", path, *OFFLINE, env=unset).exit_code == 0
    done = invoke("score", path, *OFFLINE, env={**unset, "OMP_NUM_THREADS": "7"})
    assert done.exit_code == 0, done.output
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert seen == [str(max(1, cores - 1)), "7"]
