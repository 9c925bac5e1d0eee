"""Long runs that never lose work: streaming, interrupts, safe report files, a data-only cache,
masked secrets and true reasons. Each test reproduces one way a long run used to fail a user.

Tests count rows, lines, calls and modules, never seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import os
import pickle
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from common import ROOT, ForkedCommand
from typer.testing import CliRunner

from ragas_relevancy_ext import AnswerRelevancy
from ragas_relevancy_ext.cli import app
from ragas_relevancy_ext.cli.output.jsonl import FORMAT
from ragas_relevancy_ext.run.batching import DEFAULT_MAX_BATCH
from ragas_relevancy_ext.scoring.cosines import cosine_similarities, non_finite
from ragas_relevancy_ext.scoring.redaction import redact
from ragas_relevancy_ext.store.cache import CachedJudge, SqliteStore, disk_store
from ragas_relevancy_ext.testing.loopback import Fault, LoopbackServer, pretend_reply
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge

OFFLINE = ["--embeddings", "hash"]
SECRET = "sk-test-DO-NOT-PRINT-0123456789"


def invoke(*args: str | Path, env: dict[str, str | None] | None = None):
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def rows_of(n: int, start: int = 0) -> list[dict[str, str]]:
    return [
        {
            "user_input": f"What is the policy on case {i}?",
            "response": f"Case {i} is handled within {i % 9 + 1} days. Contact support.",
        }
        for i in range(start, start + n)
    ]


def write_jsonl(path: Path, rows: list[object]) -> Path:
    text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
    path.write_text(text, encoding="utf-8")
    return path


def records(path: Path) -> list[dict]:
    """Every complete line's record (a line cut off by a kill has no newline)."""
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.split("\n")[:-1]]


def child_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", **extra}
    env.update(RAGAS_DO_NOT_TRACK="true", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


# -- 1, 2: streaming with a bounded window ------------------------------------------------------


@pytest.mark.parametrize(
    ("shared", "window"),
    [(False, 4), (True, 4 + 2 * DEFAULT_MAX_BATCH)],  # rows that wait for a shared request
    ids=["own requests", "shared requests"],
)
def test_ascore_each_reads_lazily_and_saves_rows_as_they_start(shared, window):
    judge = PretendJudge()  # counts its calls in flight (peak)
    metric = AnswerRelevancy(
        llm=judge, embeddings=HashEmbeddings(), max_concurrency=4, batch_embeddings=shared
    )
    pulled = 0

    def source():
        nonlocal pulled
        for row in rows_of(400):
            pulled += 1
            yield row

    async def run():
        seen = []
        async for index, result in metric.ascore_each(source()):
            seen.append((index, pulled, result.value))
        return seen

    seen = asyncio.run(run())
    assert sorted(i for i, _, _ in seen) == list(range(400))
    # a bounded window: the first result comes after `window` rows were read, not 400
    assert seen[0][1] <= window + 1
    assert max(pulled_then - index for index, pulled_then, _ in seen) <= window + 1
    assert judge.peak <= 4  # requests in flight stay at max_concurrency either way
    # rows finish roughly in the order they start
    assert max(abs(position - index) for position, (index, _, _) in enumerate(seen)) <= window
    assert all(math.isfinite(value) for _, _, value in seen)


def test_a_stopped_run_asks_nothing_for_rows_it_had_not_begun():
    judge = PretendJudge(latency=0.01)
    metric = AnswerRelevancy(llm=judge, embeddings=HashEmbeddings(), max_concurrency=4)

    async def run():
        stop = asyncio.Event()

        async def stop_after_8_calls():
            while judge.calls < 8:
                await asyncio.sleep(0)
            stop.set()
            return judge.calls

        stopper = asyncio.ensure_future(stop_after_8_calls())
        seen = [(i, r.value) async for i, r in metric.ascore_each(rows_of(400), stop=stop)]
        return seen, await stopper

    seen, asked_by_then = asyncio.run(run())
    # rows under way finished and came back, scored; no row that had not asked was begun
    # (a row handed a slot just before the stop may still ask: at most the 4 slots)
    assert judge.calls == len(seen) <= asked_by_then + 4 < 400
    assert sorted(i for i, _ in seen) == list(range(len(seen)))
    assert all(math.isfinite(value) for _, value in seen)


def test_a_row_that_is_not_a_mapping_is_nan_and_the_batch_goes_on():
    metric = AnswerRelevancy(llm=PretendJudge(), embeddings=HashEmbeddings())
    good = rows_of(2)
    results = asyncio.run(metric.abatch_score([good[0], "oops", good[1]]))
    assert math.isnan(results[1].value)
    assert "row must be a mapping, got str" in results[1].reason
    assert math.isfinite(results[0].value) and math.isfinite(results[2].value)


# -- 3, 4: the report file ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["input", "binary"])
def test_out_that_is_not_a_report_is_refused_and_left_byte_for_byte(tmp_path, kind):
    data = write_jsonl(tmp_path / "rows.jsonl", rows_of(3))
    target = data if kind == "input" else tmp_path / "photo.bin"
    if kind == "binary":
        target.write_bytes(bytes(range(256)) * 4)  # no newline at the end
    before = target.read_bytes()
    result = invoke("score", data, *OFFLINE, "--out", target)
    assert result.exit_code == 2, result.output
    assert "give --out a new file" in result.stderr
    assert target.read_bytes() == before
    assert not Path(f"{target}.lock").exists()


def test_report_lines_are_marked_and_carry_the_data_row_and_file_line(tmp_path):
    data = write_jsonl(tmp_path / "rows.jsonl", [rows_of(1)[0], "", "{oops", rows_of(1, 1)[0]])
    out, page = tmp_path / "out.jsonl", tmp_path / "page.html"
    result = invoke("score", data, *OFFLINE, "--out", out, "--html", page)
    assert result.exit_code == 3, result.output  # a row skipped
    lines = records(out)
    assert all(r["format"] == FORMAT for r in lines)
    assert [(r["row"], r["line"]) for r in lines] == [(1, 1), (2, 3), (3, 4)]
    assert lines[1]["skipped"].startswith("not valid JSON") and lines[1]["score"] is None
    assert "row 2, line 3" in lines[1]["error"]
    page_text = page.read_text(encoding="utf-8")
    assert all(f'id="row-{n}"' in page_text for n in (1, 2, 3))  # the skipped row included


def test_rows_set_aside_carry_the_cause_bad_input(tmp_path):
    data = tmp_path / "rows.jsonl"
    good = json.dumps(rows_of(1)[0])
    data.write_text(f'{good}\n[1, 2]\n{{"user_input": 5, "response": "x"}}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = invoke("score", data, *OFFLINE, "--out", out)
    assert result.exit_code == 3, result.output
    assert [(r["cause"], "skipped" in r) for r in records(out)] == [
        (None, False),
        ("bad_input", True),
        ("bad_input", True),
    ]


def test_a_csv_quote_that_swallows_rows_is_warned_of_on_the_command_line(tmp_path):
    data = tmp_path / "rows.csv"
    data.write_text('user_input,response\nQ1?,A1.\nQ2?,"oops\nQ3?,A3.\nQ4?,A4.\n')
    result = invoke("score", data, *OFFLINE)
    assert result.exit_code == 0, result.output
    assert "warning: line 3: the 'response' cell runs over lines 3-5" in result.stderr
    assert "2 row(s) were read from 4 data line(s)" in result.stderr


def test_resume_is_keyed_on_content_and_a_rerun_replaces_failed_rows(tmp_path):
    data = write_jsonl(tmp_path / "rows.jsonl", rows_of(5))
    out = tmp_path / "out.jsonl"
    assert invoke("score", data, *OFFLINE, "--out", out).exit_code == 0
    # a row inserted at the top and two swapped: only the new row is scored
    rows = rows_of(5)
    rows[1], rows[2] = rows[2], rows[1]
    write_jsonl(data, [*rows_of(1, 100), *rows])
    result = invoke("score", data, *OFFLINE, "--out", out)
    assert "5 row(s) already there, 1 to score" in result.stdout
    final = records(out)
    assert [r["row"] for r in final] == [1, 2, 3, 4, 5, 6]  # input order, one line per row
    assert [r["user_input"] for r in final] == [r["user_input"] for r in [*rows_of(1, 100), *rows]]

    # a failed line is replaced, not appended to
    lines = out.read_text(encoding="utf-8").splitlines()
    failed = json.loads(lines[0]) | {"error": "ConnectionError: down", "score": None}
    out.write_text("\n".join([json.dumps(failed), *lines[1:]]) + "\n", encoding="utf-8")
    again = invoke("score", data, *OFFLINE, "--out", out)
    assert "5 row(s) already there, 1 to score, 1 of them failed before" in again.stdout
    assert len(records(out)) == 6 and all(r["error"] is None for r in records(out))


def test_a_resume_after_a_kill_mid_line_scores_that_row_again_and_keeps_input_order(tmp_path):
    data = write_jsonl(tmp_path / "rows.jsonl", rows_of(4))
    out = tmp_path / "out.jsonl"
    assert invoke("score", data, *OFFLINE, "--out", out).exit_code == 0
    whole = out.read_text(encoding="utf-8").splitlines(keepends=True)
    lines = [whole[2], whole[0], whole[1][:50]]  # completion order, the last write cut off
    out.write_text("".join(lines), encoding="utf-8")
    result = invoke("score", data, *OFFLINE, "--out", out)
    assert result.exit_code == 0, result.output
    assert "2 row(s) already there, 2 to score" in result.stdout

    def without_usage(lines: list[str]) -> list[dict]:  # batched embeddings: shared requests
        return [{k: v for k, v in json.loads(line).items() if k != "usage"} for line in lines]

    assert without_usage(out.read_text(encoding="utf-8").splitlines()) == without_usage(whole)
    assert not out.with_name("out.jsonl.lock").exists()


def test_identical_rows_are_scored_once_and_each_gets_its_line(tmp_path):
    a, b = rows_of(2)
    data = write_jsonl(tmp_path / "rows.jsonl", [a, b, a])
    out = tmp_path / "out.jsonl"
    result = invoke("score", data, *OFFLINE, "--out", out)
    assert "0 row(s) already there, 2 to score" in result.stdout
    final = records(out)
    assert [r["row"] for r in final] == [1, 2, 3]
    assert final[0]["score"] == final[2]["score"] and final[0]["key"] == final[2]["key"]


@pytest.mark.slow
def test_a_second_process_on_the_same_out_is_stopped_with_the_holders_pid(tmp_path):
    data = write_jsonl(tmp_path / "rows.jsonl", rows_of(2))
    out = tmp_path / "out.jsonl"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from ragas_relevancy_ext.cli.output.jsonl import ReportFile; "
            f"r = ReportFile({str(out)!r}); r.lock(); print('locked', flush=True); "
            "sys.stdin.read(); r.close()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        result = invoke("score", data, *OFFLINE, "--out", out)
        assert result.exit_code == 2
        assert f"pid {holder.pid}" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert not out.exists()
    finally:
        holder.communicate("", timeout=30)
    assert invoke("score", data, *OFFLINE, "--out", out).exit_code == 0  # lock released


# -- interrupts, against the loopback server in a real process ----------------------------------


def start_run(server: LoopbackServer, data: Path, out: Path) -> ForkedCommand:
    args = ["score", str(data), *server.cli_options(), "--out", str(out), "--no-probes"]
    args += ["--concurrency", "4", "--timeout", "20"]
    return ForkedCommand(args, child_env(OPENAI_API_KEY="test"), out.parent / "stderr.txt")


def wait_for_lines(process: ForkedCommand, out: Path, n: int) -> None:
    """Until ``out`` holds ``n`` complete lines (bounded by the process's life)."""
    import time

    for _ in range(6000):  # polls, not a time limit: at most 6000 looks at the file
        if out.exists() and out.read_bytes().count(b"\n") >= n:
            return
        assert process.poll() is None, process.stderr()
        time.sleep(0.02)
    pytest.fail(f"{out} never reached {n} lines")


def resume_in_process(server: LoopbackServer, data: Path, out: Path) -> int:
    server.reset()
    server.endpoint_latency = {}  # the delay only had to hold rows in flight for the stop
    result = invoke(
        "score", data, *server.cli_options(), "--out", out, env={"OPENAI_API_KEY": "test"}
    )
    assert result.exit_code == 0, result.output
    return server.count("chat")


@pytest.mark.slow
def test_interrupted_runs_keep_every_finished_row_and_resume_without_asking_again(tmp_path):
    """Ctrl-C and a kill, each on its own run started at the same time (one wait for both);
    more rows than a run keeps in flight (4 requests and 128 rows waiting on shared ones)."""
    total = 200
    runs = {}
    with contextlib.ExitStack() as stack:
        for how in ("sigint", "sigkill"):
            folder = tmp_path / how
            folder.mkdir()
            data = write_jsonl(folder / "rows.jsonl", rows_of(total))
            out = folder / "out.jsonl"
            server = stack.enter_context(LoopbackServer(endpoint_latency={"chat": 0.1}))
            runs[how] = (server, data, out, start_run(server, data, out))
        for how, (_, _, out, process) in runs.items():
            wait_for_lines(process, out, 3)
            process.send_signal(signal.SIGINT if how == "sigint" else signal.SIGKILL)
        for how, (server, data, out, process) in runs.items():
            _, err = process.communicate(timeout=120)
            asked = server.count("chat")
            saved = out.read_bytes().count(b"\n")
            if how == "sigint":
                assert process.returncode == 130, err
                assert f"{saved} of {total} rows saved; run the same command to resume" in err
                assert asked == saved  # rows in flight finished and were written, none after
            else:
                assert process.returncode == -signal.SIGKILL
            assert 3 <= saved < total
            kept = {r["response"] for r in records(out) if r["error"] is None}

            resumed_calls = resume_in_process(server, data, out)
            asked_again = [
                e for e in server.requests("chat") if any(text in str(e.body) for text in kept)
            ]
            final = records(out)
            assert [r["row"] for r in final] == list(range(1, total + 1)), how  # once, in order
            # what the judge had answered is in the reply journal: only requests cut off by
            # the stop (at most --concurrency 4) are sent again
            assert total - asked <= resumed_calls <= total - asked + 4, how
            assert asked_again == [], how


# -- 5: the cache stores data, never code --------------------------------------------------------


class Boom:
    """Unpickling this would create a file: proof that code ran."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (Path(self.marker).touch, ())


def test_a_planted_pickle_in_the_cache_never_runs(tmp_path):
    marker = tmp_path / "code-ran"
    cache = tmp_path / "cache"
    store = SqliteStore(cache)
    metric_rows = rows_of(1)
    first = PretendJudge()
    run_cached(CachedJudge(first, store, "m"), metric_rows)
    payload = pickle.dumps(Boom(str(marker)))
    with contextlib.closing(sqlite3.connect(store.path)) as db, db:  # every reply: a pickle
        db.execute("UPDATE replies SET value = ?", (payload,))
    (cache / "cache.db").write_bytes(payload)  # where diskcache kept its pickles
    store.close()

    again = PretendJudge()
    results = run_cached(CachedJudge(again, disk_store(cache), "m"), metric_rows)
    assert not marker.exists()
    assert again.calls == first.calls  # the planted entries were not replies: asked again
    assert math.isfinite(results[0].value)


def run_cached(judge, rows):
    metric = AnswerRelevancy(llm=judge, embeddings=HashEmbeddings())
    return asyncio.run(metric.abatch_score(rows))


def test_a_damaged_cache_is_moved_aside_named_and_rebuilt(tmp_path):
    data = write_jsonl(tmp_path / "rows.jsonl", rows_of(2))
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "replies.sqlite3").write_bytes(b"not a database at all " * 100)
    result = invoke("score", data, *OFFLINE, "--cache", cache)
    assert result.exit_code == 0, result.output
    said = [line for line in result.stderr.splitlines() if "damaged" in line]
    assert len(said) == 1 and str(cache / "replies.sqlite3") in said[0]
    assert list(cache.glob("replies.sqlite3.damaged-*"))
    again = invoke("score", data, *OFFLINE, "--cache", cache)
    assert "2 replies reused, 0 judge calls" in again.stdout


def test_a_cache_that_cannot_be_written_is_one_line_naming_it(tmp_path, monkeypatch):
    data = write_jsonl(tmp_path / "rows.jsonl", rows_of(1))
    cache = tmp_path / "cache"
    SqliteStore(cache).close()
    monkeypatch.setattr(os, "access", lambda path, mode: mode != os.W_OK)  # as for a non-root
    result = invoke("score", data, *OFFLINE, "--cache", cache)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"ragas-relevancy: error: --cache {cache / 'replies.sqlite3'}: read-only; give --cache "
        "a folder you can write"
    ]


def test_two_stores_on_one_directory_see_each_others_replies(tmp_path):
    one, two = SqliteStore(tmp_path), SqliteStore(tmp_path)
    for i in range(50):
        (one if i % 2 else two).set(f"k{i}", json.dumps({"i": i}))
    assert [json.loads(one.get(f"k{i}"))["i"] for i in range(50)] == list(range(50))
    assert two.get("absent") is None


# -- 6: secrets ----------------------------------------------------------------------------------


def test_secrets_in_urls_are_masked():
    text = f"https://user:{SECRET}@gw.example/v1?api-version=2&api-key={SECRET}#x"
    masked = redact(text, environ={})
    assert SECRET not in masked
    assert masked == "https://***@gw.example/v1?api-version=***&api-key=***#***"


def test_a_key_in_the_base_url_is_never_printed_or_written(tmp_path):
    data = write_jsonl(tmp_path / "rows.jsonl", rows_of(1))
    out, page = tmp_path / "out.jsonl", tmp_path / "page.html"
    url = f"http://127.0.0.1:9/v1?api-key={SECRET}"
    result = invoke(
        "score",
        data,
        "--judge",
        "openai:m",
        "--base-url",
        url,
        "--embeddings",
        "openai:e",
        "--max-retries",
        "0",
        "--out",
        out,
        "--html",
        page,
        env={"OPENAI_API_KEY": "test"},
    )
    assert "api-key=***" in result.stdout
    for text in (result.stdout, result.stderr, out.read_text(), page.read_text()):
        assert SECRET not in text


@pytest.mark.slow
def test_compare_shows_the_judges_real_error(tmp_path):
    data = write_jsonl(tmp_path / "rows.jsonl", rows_of(2))
    with LoopbackServer(faults=[Fault("unauthorized", fraction=1.0, endpoint="chat")]) as server:
        result = invoke(
            "compare", data, *server.cli_options(), "--max-retries", "0",
            env={"OPENAI_API_KEY": "test"},
        )  # fmt: skip
    assert "AuthenticationError" in result.stdout
    assert "ScriptedJudgeExhausted" not in result.stdout and "recorded 0" not in result.stdout
    assert "the judge failed on 2" in result.stdout


# -- 7: true reasons ---------------------------------------------------------------------------


@pytest.mark.slow
def test_a_body_that_is_not_json_is_named_as_such_after_the_retries():
    from ragas.llms import llm_factory

    with LoopbackServer(faults=[Fault("malformed", fraction=1.0, endpoint="chat")]) as server:
        judge = llm_factory("m", provider="openai", client=server.openai_client(max_retries=0))
        metric = AnswerRelevancy(llm=judge, embeddings=HashEmbeddings(), probe_prompt="diverse")
        [result] = asyncio.run(metric.abatch_score(rows_of(1)))
        calls = server.count("chat")
    assert math.isnan(result.value) and result.report.cause == "bad_reply"
    assert "Unterminated string" in result.reason  # the reason names the body's problem
    assert result.report.usage.judge_requests == calls  # every attempt the server saw
    assert calls == 4  # instructor's own: 1 + 3 retries


@pytest.mark.parametrize("scale", [1e308, 1e-320])
def test_cosines_of_vectors_at_the_float_limits_are_exact(scale):
    import numpy as np

    question = [0.6 * scale, 0.8 * scale, 0.0]
    probes = [[0.6 * scale, 0.8 * scale, 0.0], [0.8 * scale, 0.6 * scale, 0.0], [0, 0, scale]]
    # stock's dot / (norm * norm) overflows (1e308) or underflows (1e-320) here
    q, p = np.asarray(question), np.asarray(probes)
    with np.errstate(all="ignore"):
        naive = (p @ q) / (np.linalg.norm(p, axis=1) * np.linalg.norm(q))
    assert not np.all(np.isfinite(naive)) or not np.allclose(naive, [1, 0.96, 0], atol=1e-3)
    # the same vectors scaled by a power of two (exact) into ordinary floats
    shift = 2.0 ** (-1000 if scale > 1 else 1000)
    exact = cosine_similarities(
        [x * shift for x in question], [[x * shift for x in v] for v in probes]
    )
    assert cosine_similarities(question, probes) == pytest.approx(exact, abs=1e-12)
    assert exact == pytest.approx([1.0, 0.96, 0.0], abs=1e-3)


def test_a_cosine_that_is_not_finite_is_named():
    cosines = cosine_similarities([1.0, math.inf], [[1.0, 0.0]])
    assert non_finite(cosines) == "1 of 1 cosine(s) not finite (cosine 1 is nan)"


# -- issue of first lines: the header before RAGAS, and no RAGAS when there is nothing to do -----

PROBE = textwrap.dedent(
    """
    import json, sys
    from ragas_relevancy_ext.cli import main

    results = []
    for args in json.loads(sys.argv[1]):
        sys.argv = ["ragas-relevancy", *args]
        try:
            main()
        except SystemExit as exc:
            results.append([exc.code, "ragas" in sys.modules])
    print(json.dumps(results))
    """
)


@pytest.mark.slow
def test_checks_come_before_ragas_and_a_finished_resume_never_loads_it(tmp_path):
    data = write_jsonl(tmp_path / "rows.jsonl", rows_of(3))
    out = tmp_path / "out.jsonl"
    assert invoke("score", data, *OFFLINE, "--out", out).exit_code == 0
    not_ours = tmp_path / "notes.txt"
    not_ours.write_text("my notes\n")
    runs = [
        ["score", str(data), *OFFLINE, "--judge", "openai:gpt-4o-mini"],  # no key
        ["score", str(data), *OFFLINE, "--map", "nothing=user_input"],  # bad --map
        ["score", str(data), *OFFLINE, "--out", str(not_ours)],  # not a report
        ["score", str(data), *OFFLINE, "--out", str(out)],  # nothing left to do
    ]
    env = child_env()
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(runs)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [[2, False]] * 3 + [[0, False]]
    assert "3 row(s) already there, 0 to score" in done.stdout


def test_the_header_is_out_before_ragas_is_set_up(tmp_path, monkeypatch):
    import importlib

    score_command = importlib.import_module("ragas_relevancy_ext.cli.score")
    data = write_jsonl(tmp_path / "rows.jsonl", rows_of(2))
    seen: list[str] = []
    real = score_command.prepare

    def prepare(*args, **kwargs):  # RAGAS and the providers load here, and only here
        sys.stdout.flush()
        seen.append(sys.stdout.buffer.getvalue().decode())
        return real(*args, **kwargs)

    monkeypatch.setattr(score_command, "prepare", prepare)
    result = invoke("score", data, *OFFLINE)
    assert result.exit_code == 0, result.output
    [before] = seen
    assert before.startswith("file: ") and "(2 row(s), 0 bad)" in before
    assert "judge: offline" in before and "embeddings: hash" in before


# -- 7: the reply journal: a stopped run, resumed, pays for no judge reply twice -------------


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGINT])
def test_a_stopped_run_resumed_asks_the_judge_nothing_it_had_answered(tmp_path, stop):
    data = write_jsonl(tmp_path / "rows.jsonl", rows_of(300))
    out, concurrency = tmp_path / "out.jsonl", 8
    moment = random.Random().randint(1, 299)  # stopped once the judge has answered this many
    answers, reached = itertools.count(1), threading.Event()

    def reply(messages: list[dict]) -> str:
        if next(answers) >= moment:
            reached.set()
        return pretend_reply(messages)

    with LoopbackServer(reply=reply, rpm=3000) as server:
        args = [str(data), *server.cli_options(), "--rpm", "3000", "--no-progress"]
        args += ["--concurrency", str(concurrency), "--out", str(out)]
        env = {k: v for k, v in child_env().items() if k != "OPENAI_API_KEY"}
        first = ForkedCommand(["score", *args], env, tmp_path / "stderr.txt")
        assert reached.wait(timeout=120), first.stderr()
        first.send_signal(stop)
        first.wait(timeout=120)
        with contextlib.closing(sqlite3.connect(tmp_path / "out.jsonl.replies.sqlite3")) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        again = invoke("score", *args, env={"OPENAI_API_KEY": None})  # the same command
        paid = [r for r in server.requests("chat") if r.status == 200]
    assert again.exit_code == 0, again.output
    assert [r["row"] for r in records(out)] == list(range(1, 301))
    assert all(r["error"] is None for r in records(out))
    why = f"stopped by {stop!r} after {moment} answers"
    if stop == signal.SIGINT:
        assert len(paid) == 300, why
    else:
        assert len(paid) <= 300 + concurrency, why
    assert not list(tmp_path.glob("out.jsonl.replies*"))  # the journal goes with a complete run
