"""Scoring on Ray Data actors: same scores and keys as one process, every row back, resume
across engines, a killed actor, the usage summary.

Ray starts once for the session and every actor start imports RAGAS, so the module runs Ray
Data with actors once, in a module fixture every such test reads: ``score --engine ray`` with
two actors on one loopback server, one killed before it loads RAGAS, resuming a report that
``score`` wrote in one process and that ``score`` then resumes again. These tests need the
``[ray]`` extra and fail, never skip, without it: ``pip install -e ".[test,local,ray]"``.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

try:
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq
    import ray
    import ray.data
    from ray import cloudpickle
except ImportError as exc:
    raise ImportError(
        f"these tests need the [ray] extra: pip install -e '.[test,local,ray]' ({exc})"
    ) from exc

from common import ROOT, OtlpReceiver

from ragas_relevancy_ext.cli import app, ray_score
from ragas_relevancy_ext.cli.datafile import BadRow, Source
from ragas_relevancy_ext.cli.errors import UsageError
from ragas_relevancy_ext.cli.output.jsonl import FORMAT, ReportFile
from ragas_relevancy_ext.cli.providers import Built, Spec
from ragas_relevancy_ext.cli.ray_score import (
    JsonlOutput,
    OutputError,
    ParquetOutput,
    header_fields,
    read_input,
)
from ragas_relevancy_ext.cli.setup import Scorer, Settings, check_settings, prepare
from ragas_relevancy_ext.scoring.redaction import MASK
from ragas_relevancy_ext.scoring.report import input_problem, row_key
from ragas_relevancy_ext.scoring.tracing import SAMPLE_SPAN
from ragas_relevancy_ext.testing.loopback import LoopbackServer, pretend_reply

TOPICS = ["order A17", "a refund", "the warranty", "card payments", "delivery", "returns"]
FAIL = "[judge fails here]"  # a response holding this makes the server answer 500
SET_ASIDE = {3: "response is empty", 17: "no user_input", 23: "response is empty",
             37: "no user_input"}  # fmt: skip
FAILS = (11, 31)  # rows whose judge call fails
ON_RAY = [11, *range(19, 40)]  # the rows the Ray run scores (see the `run` fixture)
PRICES = ["--price-in", "0.5", "--price-out", "2", "--price-embeddings", "0.1"]

# Helpers below are shipped to the actors by value: the actors cannot import this test file.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def local_ray():
    # this process imports RAGAS (for the one-process scores) while Ray's daemons start
    loading = threading.Thread(target=importlib.import_module, args=("ragas",), daemon=True)
    loading.start()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    loading.join()
    yield
    ray.shutdown()


def judge_reply(messages: list[dict[str, Any]]) -> str:
    """The pretend judge's reply, or an error (a 500) for a response marked to fail."""
    if FAIL in json.dumps(messages):
        raise RuntimeError("this row's judge call fails")
    return pretend_reply(messages)


@pytest.fixture(scope="module")
def server():
    with LoopbackServer(width=32, reply=judge_reply) as running:
        yield running


def rows(n: int, *, fail: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    """``n`` rows; those in :data:`SET_ASIDE` hold nothing to score, those in ``fail`` make
    the judge fail."""
    items = [
        {
            "id": i,
            "user_input": f"What about {TOPICS[i % len(TOPICS)]} ({i})?",
            "response": f"Here is what we found about {TOPICS[i % len(TOPICS)]} ({i}): handled.",
        }
        for i in range(n)
    ]
    for i, problem in SET_ASIDE.items():
        if i < n:
            field = "response" if "response" in problem else "user_input"
            items[i][field] = "" if field == "response" else None
    for i in fail:
        items[i]["response"] += f" {FAIL}"
    return items


def loop_settings(server: LoopbackServer, **changes: Any) -> Settings:
    """The settings ``server.cli_options()`` and ``--max-retries 0`` give."""
    values: dict[str, Any] = {"concurrency": 4, **changes}
    return Settings(
        judge="openai:loop-judge",
        base_url=server.openai_base_url,
        embeddings="openai:loop-embed",
        max_retries=0,
        **values,
    )


def single_process(settings: Settings, items: list[dict[str, Any]]) -> dict[int, Any]:
    """id -> report of the rows with something to score, scored in this process by the
    metric's batch path."""
    metric = prepare(settings).metric()
    todo = [r for r in items if input_problem(r) is None]
    inputs = [{"user_input": r["user_input"], "response": r["response"]} for r in todo]
    results = asyncio.run(metric.abatch_score(inputs))
    return {r["id"]: result.report for r, result in zip(todo, results, strict=True)}


def same_score(a: float | None, b: float) -> bool:
    a = math.nan if a is None else a
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12)


def check_against(out: list[dict[str, Any]], expected: dict[int, Any]) -> None:
    """Each row with something to score has the score, probes and reason one process gives.

    ``out`` holds Ray's rows (``id`` and the report as JSON in ``report``) or report lines
    (the report's fields at the top, ``id`` in ``extra``)."""
    checked = 0
    for row in out:
        id_ = line_id(row)
        if id_ in SET_ASIDE:
            continue
        report = expected[id_]
        got = json.loads(row["report"]) if "report" in row else row
        assert same_score(row["score"], report.score), (row, report)
        assert got["probes"] == report.to_dict()["probes"]
        assert row["reason"] == report.reason
        checked += 1
    assert checked == len(expected)


def check_set_aside(row: dict[str, Any], tag: str) -> None:
    """A row with nothing to score: NaN, why, and the key one process gives it."""
    id_ = line_id(row)
    problem = SET_ASIDE[id_]
    assert row["score"] is None or math.isnan(row["score"])
    assert row["error"].startswith(f"skipped: {problem}") and problem in row["reason"]
    assert row["key"] == row_key(row["user_input"], row["response"], tag, problem)


def line_id(row: dict[str, Any]) -> int:
    """The ``id`` of a Ray row or of a report line; a line `score` wrote for a row it set aside
    carries no other column, only its row number in the input."""
    if "id" in row:
        return row["id"]
    return row["extra"].get("id", row["row"] - 1)


def invoke(*args: str | Path):
    return CliRunner().invoke(app, [str(a) for a in args], env={"OPENAI_API_KEY": None})


def write_jsonl(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in items), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def header_line(output: str, name: str) -> str:
    return next(line for line in output.splitlines() if line.startswith(f"{name}: "))


# -- Ray stays off every other path ---------------------------------------------------------


@pytest.mark.slow
def test_the_package_the_cli_and_help_load_no_ray_module():
    code = (
        "import sys, ragas_relevancy_ext, ragas_relevancy_ext.cli\n"
        "from typer.testing import CliRunner\n"
        "out = CliRunner().invoke(ragas_relevancy_ext.cli.app, ['score', '--help']).stdout\n"
        "assert '--engine' in out and '--actors' in out and '--ray-address' in out, out\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'pyarrow')))\n"
    )
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# -- one Ray run, read by the tests below -------------------------------------------------


class DiesOnce:
    """A metric factory whose metric kills its own actor process on the first batch any actor
    gets, once, before it loads RAGAS (so the kill costs Ray one more actor start, not one more
    RAGAS import); the restarted actor builds the real metric when that batch comes again."""

    def __init__(self, settings: Settings, marker: str):
        self.settings = settings
        self.marker = marker

    def __call__(self) -> Any:
        return FirstBatchKills(self.settings, self.marker)


class FirstBatchKills:
    """The metric :class:`DiesOnce` gives: the settings' metric, built when its stream of rows
    starts."""

    def __init__(self, settings: Settings, marker: str):
        self.settings = settings
        self.marker = marker

    async def ascore_each(self, inputs: Any) -> Any:
        try:
            handle = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            async for scored in prepare(self.settings).metric().ascore_each(inputs):
                yield scored
            return
        os.write(handle, str(os.getpid()).encode())
        os.close(handle)
        os._exit(1)  # the actor's process dies mid-batch


@pytest.fixture(scope="module")
def run(local_ray, server, tmp_path_factory):
    """``score`` in one process writes rows 0-19 (a crash cuts off its last line); ``score
    --engine ray --actors 2`` resumes that report on all 40 rows, read from a Parquet folder,
    one actor killed on its first batch; ``score`` in one process resumes it again. The
    batches ``score_dataset`` gave the command line's writer are kept."""
    tmp = tmp_path_factory.mktemp("run")
    items = rows(40, fail=FAILS)
    report = tmp / "scored.jsonl"
    options = [*server.cli_options(), "--max-retries", "0", "--concurrency", "1"]
    options += ["--cache", tmp / "cache", "--no-progress", "--out", report]
    server.reset()
    first = invoke("score", write_jsonl(tmp / "first.jsonl", items[:20]), *options)
    assert first.exit_code == 3, first.output  # rows 3 and 17 set aside, row 11 failed
    torn = line_id(read_jsonl(report)[-1])
    text = report.read_bytes()
    report.write_bytes(text[: len(text) - 40])  # a crash mid-write: the last line is cut off

    data = tmp / "in"
    data.mkdir()
    for part, start in enumerate((0, 20)):
        pq.write_table(pa.Table.from_pylist(items[start : start + 20]), data / f"p{part}.parquet")
    marker = tmp / "killed"
    batches: list[Any] = []
    save = JsonlOutput.save

    def keep(self: JsonlOutput, stream: Any, setup: Scorer) -> Any:
        for batch in save(self, stream, setup):
            batches.append(batch)
            yield batch

    with pytest.MonkeyPatch.context() as patch, OtlpReceiver() as received:
        patch.setattr(JsonlOutput, "save", keep)
        patch.setattr(ray_score, "SettingsMetric", lambda s: DiesOnce(s, str(marker)))
        server.reset()
        engine = ["--engine", "ray", "--actors", "2", "--otel", received.url]
        on_ray = invoke("score", data, *options, *PRICES, *engine)
        spans = list(received.spans)
    requests = server.requests("chat")
    usage = {endpoint: server.usage(endpoint) for endpoint in ("chat", "embeddings")}
    after_ray = read_jsonl(report)

    server.reset()
    everything = write_jsonl(tmp / "all.jsonl", items)
    local = invoke("score", everything, *options)
    local_requests = server.requests()
    server.reset()
    return SimpleNamespace(
        items=items,
        torn=torn,
        marker=marker,
        batches=batches,
        on_ray=on_ray,
        requests=requests,
        usage=usage,
        after_ray=after_ray,
        local=local,
        local_requests=local_requests,
        final=read_jsonl(report),
        everything=everything,
        expected=single_process(loop_settings(server), [items[i] for i in ON_RAY]),
        tag=check_settings(loop_settings(server)).settings_tag,
        tmp=tmp,
        spans=spans,
    )


@pytest.mark.slow
def test_every_row_comes_back_once_with_its_columns(run):
    # score_dataset's rows as the writer got them: the input's columns, the key and four more
    scored = [row for batch in run.batches for row in batch.to_pylist()]
    assert sorted(r["id"] for r in scored) == ON_RAY
    columns = {"id", "user_input", "response", "key", "score", "reason", "error", "report"}
    assert all(set(row) == columns for row in scored)
    assert sorted(line_id(r) for r in run.after_ray) == list(range(40))  # one line per row


@pytest.mark.slow
def test_scores_and_keys_equal_one_process_row_by_row(run):
    # the lines Ray wrote; `score` in one process wrote the others
    written = [line for line in run.after_ray if line_id(line) in ON_RAY]
    check_against(written, run.expected)
    assert len({line["score"] for line in written}) > 5  # scores that tell rows apart
    for line in run.after_ray:  # one key on both engines, so each resumes the other
        item = run.items[line_id(line)]
        problem = SET_ASIDE.get(item["id"])
        assert line["key"] == row_key(item["user_input"], item["response"], run.tag, problem)


@pytest.mark.slow
def test_nan_rows_carry_their_reasons(run):
    lines = {line_id(r): r for r in run.after_ray}
    assert sorted(i for i, r in lines.items() if r["score"] is None) == sorted([*SET_ASIDE, *FAILS])
    for i in FAILS:
        assert "this row's judge call fails" in lines[i]["error"]
        assert "this row's judge call fails" in lines[i]["reason"]
    for i in SET_ASIDE:
        check_set_aside(lines[i], run.tag)


@pytest.mark.slow
def test_a_killed_actor_is_restarted_and_its_batch_scored_again(run):
    # an actor process (not this one) left the marker and exited on the first batch...
    assert int(run.marker.read_text()) != os.getpid()
    # ...and Ray restarted it and ran that batch again: every row is there
    assert sorted(r["id"] for batch in run.batches for r in batch.to_pylist()) == ON_RAY


@pytest.mark.slow
def test_each_actor_sends_its_spans_under_the_command_s_span(run):
    """``--otel``: the driver's span of the run, and every sample the actors scored under it
    in the same trace (sent after each batch), its judge calls under the sample."""
    (command,) = [s for s in run.spans if s["name"] == "ragas-relevancy score"]
    samples = [s for s in run.spans if s["name"] == SAMPLE_SPAN]
    scored_on_ray = [i for i in ON_RAY if i not in SET_ASIDE]
    assert len(samples) == len(scored_on_ray)
    assert {s["parent_id"] for s in samples} == {command["span_id"]}
    assert {s["trace_id"] for s in run.spans} == {command["trace_id"]}
    causes = [s["attributes"].get("ragas_relevancy.cause") for s in samples]
    assert causes.count("server_error") == len([i for i in FAILS if i in scored_on_ray])
    chats = [s for s in run.spans if s["name"] == "chat loop-judge"]
    asked = {c["parent_id"] for c in chats}
    assert asked <= {s["span_id"] for s in samples}
    for sample in samples:  # the judge was asked, or answered from --cache (no request)
        cached = sample["attributes"].get("ragas_relevancy.usage.cached", 0)
        assert (sample["span_id"] in asked) != (cached > 0), sample


def test_resume_scores_only_the_missing_rows(run):
    on_ray = run.on_ray
    assert on_ray.exit_code == 3, on_ray.output  # rows set aside or failed are NaN
    assert "engine: ray, 2 actor(s) x 1 call(s) in flight" in on_ray.stdout  # on one server
    assert run.torn == 19
    assert "18 row(s) already there" in on_ray.stdout  # rows 0-18, less row 11, which failed
    assert "wrote 22 row(s)" in on_ray.stdout  # row 11, the cut-off row 19, and rows 20-39
    # the judge is asked for rows 20-39 with something to score; the cut-off row's reply is in
    # the cache `score` filled, shared by the actors
    asked = [r for r in run.requests if FAIL not in json.dumps(r.body)]
    assert len(asked) == 17  # rows 20-39, less 23 and 37 (set aside) and 31 (fails)
    assert len(run.requests) > len(asked)  # rows 11 and 31 were asked, and failed again


@pytest.mark.slow
def test_cli_prints_the_usage_and_cost_score_prints(run):
    chat, embed = run.usage["chat"], run.usage["embeddings"]
    scored = 20  # the 22 rows written less the 2 set aside, as `score` counts them
    # every judge request that reached the server, a failing row's retries included
    sent = len(run.requests)
    totals = (
        f"usage ({scored} row(s)): judge {sent} request(s), "
        f"{chat['prompt_tokens']:,} prompt + {chat['completion_tokens']:,} completion tokens | "
        f"embeddings {embed['requests']} request(s), {embed['prompt_tokens']:,} tokens | cached 1"
    )
    assert totals in run.on_ray.stdout
    mean = f"per row: judge {sent / scored:.2f} request(s), "
    assert mean + f"{chat['prompt_tokens'] / scored:,.2f}" in run.on_ray.stdout
    usd = (
        chat["prompt_tokens"] * 0.5 + chat["completion_tokens"] * 2 + embed["prompt_tokens"] * 0.1
    ) / 1e6
    dollars = f"${usd:.4f}" if usd >= 0.01 else f"${usd:.4g}"
    assert f"cost: {dollars} (" in run.on_ray.stdout


@pytest.mark.slow
def test_cli_header_shows_the_labels_score_shows(run):
    for name in ("judge", "embeddings", "probes"):
        assert header_line(run.on_ray.stdout, name) == header_line(run.local.stdout, name)


def test_the_ray_header_redacts_secrets_in_labels(monkeypatch):
    secret = "sk-ray-header-secret-7f3a"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    spec = Spec("openai", "loop")
    setup = Scorer(
        Settings(judge="openai:loop", embeddings="openai:loop"),
        Built(None, f"openai:loop at http://me:{secret}@127.0.0.1/v1", spec),
        Built(None, f"openai:loop at http://127.0.0.1/v1?api-key={secret}#{secret}", spec),
    )
    fields = header_fields(Path("in"), setup, 2, Path("out.jsonl"), 0)
    assert secret not in json.dumps(fields)
    assert fields["judge"] == f"openai:loop at http://{MASK}@127.0.0.1/v1"
    assert fields["embeddings"] == f"openai:loop at http://127.0.0.1/v1?api-key={MASK}#{MASK}"


@pytest.mark.slow
def test_a_row_set_aside_has_one_key_and_neither_engine_writes_it_again(run):
    # the key `score` gives each row it sets aside, read from the file by its own reader
    bad = [e for e in Source(run.everything, {}).entries() if isinstance(e, BadRow)]
    keys = {e.number - 1: row_key(e.user_input, e.response, run.tag, e.problem) for e in bad}
    assert sorted(keys) == sorted(SET_ASIDE)
    lines = {line_id(r): r for r in run.after_ray}
    # Ray after one process: the lines `score` wrote for rows 3 and 17 are left as they were
    for i in (3, 17):
        assert lines[i]["key"] == keys[i] and f"(row {i + 1}, " in lines[i]["error"]
    # Ray sets rows 23 and 37 aside with the key and the mark `score` gives them
    for i in (23, 37):
        assert lines[i]["key"] == keys[i] and lines[i]["skipped"] == SET_ASIDE[i]
        assert "(row" not in lines[i]["error"]
    # one process after Ray: only the rows that failed are asked again
    assert run.local.exit_code == 3, run.local.output
    assert "38 row(s) already there, 2 to score" in run.local.stdout
    assert run.local_requests and all(FAIL in json.dumps(r.body) for r in run.local_requests)
    assert [line_id(r) for r in run.final] == list(range(40))  # now in input order


@pytest.mark.slow
def test_the_parquet_writer_saves_the_batches_and_resumes_from_them(run):
    batches, folder = run.batches, run.tmp / "parts"
    scored = [row for batch in batches for row in batch.to_pylist()]
    parts = ParquetOutput(folder)
    assert list(parts.save(batches, None)) == batches  # type: ignore[arg-type]
    saved = pq.read_table(folder).to_pylist()
    assert sorted(r["id"] for r in saved) == ON_RAY
    assert {r["format"] for r in saved} == {FORMAT}
    assert sorted(r["row"] for r in saved) == list(range(1, len(ON_RAY) + 1))
    again = ParquetOutput(folder)
    done = {r["key"] for r in scored if r["error"] is None or r["id"] in SET_ASIDE}
    assert again.done_keys() == done and again.set_aside == 2
    assert len(done) == len(ON_RAY) - len(FAILS)
    # a part without the report's format is not ours: the folder is refused
    pq.write_table(pa.Table.from_pylist(rows(2)), folder / "part-x.parquet")
    with pytest.raises(OutputError, match="part-x.parquet, which this command did not write"):
        ParquetOutput(folder).done_keys()


@pytest.mark.slow
def test_the_command_line_reads_jsonl_and_csv_files(local_ray, tmp_path):
    items = rows(3)
    write_jsonl(tmp_path / "rows.jsonl", items[:2])
    pcsv.write_csv(pa.Table.from_pylist(items[2:]), tmp_path / "rows.csv")
    both = read_input(tmp_path / "rows.jsonl").union(read_input(tmp_path / "rows.csv"))
    got = sorted((r["id"], r["user_input"], r["response"]) for r in both.take_all())
    assert got == [(r["id"], r["user_input"], r["response"]) for r in items]


def test_the_command_line_reads_a_folder_of_one_kind_only(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(pa.Table.from_pylist(rows(2)), folder / "a.parquet")
    (folder / "b.csv").write_text("id,user_input,response\n", encoding="utf-8")
    with pytest.raises(UsageError, match="files of one kind: .jsonl, .csv or .parquet"):
        read_input(folder)


def test_cli_refuses_outputs_it_did_not_write_untouched(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", rows(3))
    before = path.read_bytes()
    options = ["--embeddings", "hash", "--engine", "ray", "--no-progress"]
    refused = invoke("score", path, *options, "--out", path)
    assert refused.exit_code == 2 and "is the input file" in refused.stderr
    other = write_jsonl(tmp_path / "other.jsonl", rows(3))
    refused = invoke("score", path, *options, "--out", other)
    assert refused.exit_code == 2 and "is not a report of ragas-relevancy" in refused.stderr
    assert path.read_bytes() == before == other.read_bytes()

    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("mine")
    refused = invoke("score", path, *options, "--out", foreign)
    assert refused.exit_code == 2
    assert "did not write" in refused.stderr
    assert (foreign / "todo.txt").read_text() == "mine" and len(list(foreign.iterdir())) == 1


def test_cli_refuses_a_jsonl_out_another_process_is_writing(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", rows(3))
    holder = ReportFile(tmp_path / "out.jsonl")
    holder.lock()
    try:
        refused = invoke(
            "score", path, "--embeddings", "hash", "--engine", "ray",
            "--out", tmp_path / "out.jsonl",
        )  # fmt: skip
    finally:
        holder.close()
    assert refused.exit_code == 2 and "being written by another" in refused.stderr


def test_cli_ray_options_without_the_engine_and_the_engine_without_out_are_refused(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", rows(2))
    alone = invoke("score", path, "--embeddings", "hash", "--actors", "3")
    assert alone.exit_code == 2 and "--actors go(es) with --engine ray" in alone.stderr
    no_out = invoke("score", path, "--embeddings", "hash", "--engine", "ray")
    assert no_out.exit_code == 2 and "--engine ray writes to --out" in no_out.stderr
    html = invoke(
        "score", path, "--embeddings", "hash", "--engine", "ray", "--out", tmp_path / "o.jsonl",
        "--html", tmp_path / "o.html",
    )  # fmt: skip
    assert html.exit_code == 2 and "--html is not available with --engine ray" in html.stderr


def test_cli_engine_ray_without_ray_installed_says_how_to_install_it(tmp_path, monkeypatch):
    path = write_jsonl(tmp_path / "rows.jsonl", rows(2))
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the extra were not installed
    result = invoke(
        "score", path, "--embeddings", "hash", "--engine", "ray", "--out", tmp_path / "o.jsonl"
    )
    assert result.exit_code == 2
    assert "pip install 'ragas-relevancy-ext[ray]'" in result.stderr


@pytest.mark.parametrize(("rows", "noted"), [(3, True), (64, False)])
def test_a_job_too_small_for_ray_says_so_in_one_line_before_ray_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: int, noted: bool
) -> None:
    data = tmp_path / "rows.jsonl"
    lines = [{"user_input": f"Question {i}?", "response": f"Answer {i}."} for i in range(rows)]
    data.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    started: list[dict[str, Any]] = []

    def not_here(*args: Any, **kwargs: Any) -> None:
        started.append(kwargs)
        raise RuntimeError("Ray is not started in this test")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", not_here)
    result = invoke(
        "score", data, "--embeddings", "hash", "--engine", "ray", "--actors", "2",
        "--concurrency", "4", "--out", tmp_path / "out.jsonl",
    )  # fmt: skip
    assert len(started) == 1 and started[0]["log_to_driver"] is False  # Ray's logs stay its own
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    batch = ray_score.ROWS_PER_CALL_IN_FLIGHT * 4  # rows per batch at --concurrency 4
    expected = (
        f"note: 3 row(s) to score fill fewer than 2 actor(s) x {batch} rows per batch, so Ray's "
        "start-up costs more than its actors gain; --engine local is faster here"
    )
    assert notes == ([expected] if noted else [])


def test_rows_are_counted_without_ray_and_no_further_than_asked(tmp_path: Path) -> None:
    table = tmp_path / "rows.csv"
    table.write_text('user_input,response\nq1,"a\nb"\n\nq2,a\nq3,a\n', encoding="utf-8")
    assert ray_score.count_rows(table, 100) == 3  # a quoted newline is one row; blanks none
    assert ray_score.count_rows(table, 2) == 2
    folder = tmp_path / "parts"
    folder.mkdir()
    pq.write_table(pa.table({"user_input": ["q"] * 5, "response": ["a"] * 5}), folder / "a.parquet")
    (folder / "_SUCCESS").write_text("")
    assert ray_score.count_rows(folder, 100) == 5


def test_the_actor_pool_is_asked_for_as_ray_now_wants_it() -> None:
    from ragas_relevancy_ext.ray.engine import BATCHES_PER_ACTOR, score_dataset

    calls: list[dict[str, Any]] = []

    class Recorder:  # what score_dataset asks of a dataset, recorded; Ray is not started
        def schema(self) -> Any:
            return SimpleNamespace(names=["user_input", "response"])

        def map_batches(self, fn: Any, **kwargs: Any) -> Recorder:
            calls.append(kwargs)
            return self

        def repartition(self, **kwargs: Any) -> Recorder:
            return self

    limits: Any = SimpleNamespace()  # a stand-in: RayLimits starts an actor
    score_dataset(Recorder(), dict, concurrency=3, batch_size=8, limits=limits)  # type: ignore[arg-type]
    scoring = calls[-1]
    pool = scoring["compute"]
    assert isinstance(pool, ray.data.ActorPoolStrategy)
    assert (pool.min_size, pool.max_size) == (3, 3)
    batches = getattr(pool, "max_concurrent_calls_per_actor", None)
    if batches is None:  # before Ray 2.60, an actor's calls at once are a remote argument
        batches = scoring.pop("max_concurrency")
    assert batches == pool.max_tasks_in_flight_per_actor == BATCHES_PER_ACTOR
    # Ray 2.51 deprecates `concurrency`, Ray 2.60 remote arguments (`max_concurrency`...)
    assert not {"concurrency", "max_concurrency", "ray_remote_args"} & set(scoring)


class Streams:
    """A metric whose ``ascore_each`` counts the streams it is asked for and the rows each one
    reads; a row whose response is ``"breaks"`` ends its stream with an error."""

    def __init__(self) -> None:
        self.streams: list[list[str]] = []

    async def ascore_each(self, inputs: Any) -> Any:
        read: list[str] = []
        self.streams.append(read)
        index = 0
        async for row in inputs:
            read.append(row["user_input"])
            if row["response"] == "breaks":
                raise RuntimeError("the stream broke")
            yield index, SimpleNamespace(value=float(len(read)), reason="fine")
            index += 1


def scorer(metric: Any) -> Any:
    from ragas_relevancy_ext.ray.engine import _Scorer

    return _Scorer(lambda: metric, None, "user_input", "response")


async def scored(actor: Any, *batches: list[tuple[str, str]]) -> list[list[dict[str, Any]]]:
    """The rows each batch comes back with, the batches handed to ``actor`` at once."""

    async def one(batch: list[tuple[str, str]]) -> list[dict[str, Any]]:
        table = pa.Table.from_pylist([{"user_input": u, "response": r} for u, r in batch])
        return [row async for out in actor(table) for row in out.to_pylist()]

    return list(await asyncio.gather(*map(one, batches)))


def test_an_actor_s_batches_under_way_share_one_stream_of_its_metric() -> None:
    metric = Streams()
    first, second = asyncio.run(
        scored(scorer(metric), [("q1", "a"), ("q2", "a")], [("q3", "a"), ("q4", "")])
    )
    assert len(metric.streams) == 1 and sorted(metric.streams[0]) == ["q1", "q2", "q3"]
    assert [r["score"] for r in first] == [1.0, 2.0] and second[0]["score"] == 3.0
    assert second[1]["error"] == "skipped: response is empty"  # set aside, never streamed


def test_a_failed_stream_fails_its_rows_saying_why_and_the_next_batch_gets_another() -> None:
    metric = Streams()
    actor = scorer(metric)
    (broken,) = asyncio.run(scored(actor, [("q1", "a"), ("q2", "breaks")]))
    assert {r["error"] for r in broken} == {"RuntimeError: the stream broke"}
    assert all(r["reason"] == "batch failed: RuntimeError: the stream broke" for r in broken)
    (again,) = asyncio.run(scored(actor, [("q3", "a")]))
    assert len(metric.streams) == 2 and again[0]["score"] == 1.0
