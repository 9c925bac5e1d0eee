"""Scoring on Ray Data actors: same scores as one process, every row back, resume, a killed actor.

Ray starts once for the session (``ray.init(num_cpus=2)``); every actor start imports RAGAS, so
the module runs Ray Data twice only: the library call (two actors on one server, one killed),
whose batches go through the command line's writers, and the command line's resume of that
report. These tests need the ``[ray]`` extra and fail, never skip, without it:
``pip install -e ".[test,local,ray]"``.
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
from typing import Any

import pytest
from typer.testing import CliRunner

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import ray
    import ray.data
    from ray import cloudpickle
except ImportError as exc:
    raise ImportError(
        f"these tests need the [ray] extra: pip install -e '.[test,local,ray]' ({exc})"
    ) from exc

from ragas_relevancy_ext.cli import app
from ragas_relevancy_ext.cli.output.jsonl import FORMAT, ReportFile
from ragas_relevancy_ext.cli.ray_score import JsonlOutput, OutputError, ParquetOutput
from ragas_relevancy_ext.cli.setup import Settings, plan, prepare
from ragas_relevancy_ext.ray_engine import score_dataset
from ragas_relevancy_ext.report import content_key
from ragas_relevancy_ext.testing.loopback import LoopbackServer

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = Settings(judge="offline", embeddings="hash")
TOPICS = ["order A17", "a refund", "the warranty", "card payments", "delivery", "returns"]

# Helpers below are shipped to the actors by value: the actors cannot import this test file.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="session")
def local_ray():
    # this process imports RAGAS (for the one-process scores) while Ray's daemons start
    loading = threading.Thread(target=importlib.import_module, args=("ragas",), daemon=True)
    loading.start()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    loading.join()
    yield
    ray.shutdown()


@pytest.fixture()
def server():
    with LoopbackServer(width=32) as running:
        yield running


def rows(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "user_input": f"What about {TOPICS[i % len(TOPICS)]} ({i})?",
            "response": f"Here is what we know about {TOPICS[i % len(TOPICS)]} ({i}): handled.",
        }
        for i in range(start, start + n)
    ]


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


def with_bad_rows(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows 3 and 17 fail in the metric: an empty response, a missing question."""
    items[3]["response"] = ""  # ValueError in the metric
    items[17]["user_input"] = None  # TypeError in the metric
    return items


def single_process(settings: Settings, items: list[dict[str, Any]]) -> dict[int, Any]:
    """id -> report, scored in this process by the metric's batch path."""
    metric = prepare(settings).metric()
    inputs = [{"user_input": r["user_input"], "response": r["response"]} for r in items]
    results = asyncio.run(metric.abatch_score(inputs))
    return {r["id"]: result.report for r, result in zip(items, results, strict=True)}


def same_score(a: float | None, b: float) -> bool:
    a = math.nan if a is None else a
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12)


def check_against(out: list[dict[str, Any]], expected: dict[int, Any]) -> None:
    """Every row once, and each row's score, probes and reason as one process gives them.

    ``out`` holds Ray's rows (``id`` and the report as JSON in ``report``) or report lines
    (the report's fields at the top, ``id`` in ``extra``)."""
    ids = [r["id"] if "id" in r else r["extra"]["id"] for r in out]
    assert sorted(ids) == sorted(expected)
    for row, id_ in zip(out, ids, strict=True):
        report = expected[id_]
        got = json.loads(row["report"]) if "report" in row else row
        assert same_score(row["score"], report.score), (row, report)
        assert got["probes"] == report.to_dict()["probes"]
        assert row["reason"] == report.reason


def invoke(*args: str | Path):
    return CliRunner().invoke(app, [str(a) for a in args], env={"OPENAI_API_KEY": None})


def write_jsonl(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in items), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- Ray stays off every other path ---------------------------------------------------------


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


# -- the library call ------------------------------------------------------------------------


class DiesOnce:
    """A metric factory whose metric kills its own actor process on its first batch, once."""

    def __init__(self, settings: Settings, marker: str):
        self.settings = settings
        self.marker = marker

    def __call__(self) -> Any:
        metric = prepare(self.settings).metric()
        score_batch = metric.abatch_score
        marker = self.marker

        async def abatch_score(inputs: list[dict[str, Any]]) -> Any:
            try:
                handle = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return await score_batch(inputs)
            os.write(handle, str(os.getpid()).encode())
            os.close(handle)
            os._exit(1)  # the actor's process dies mid-batch

        metric.abatch_score = abatch_score
        return metric


def test_actors_on_one_server_a_killed_actor_and_a_resume_that_scores_only_missing_rows(
    tmp_path, server, local_ray
):
    # -- the library call: 2 actors on one server, one of them killed mid-batch, once --------
    settings = loop_settings(server, concurrency=1, cache=tmp_path / "cache")
    tag = plan(settings).score_tag  # the command line's key, so its resume reads these rows
    items = with_bad_rows(rows(30))
    marker = tmp_path / "killed"
    ds = ray.data.from_items(items, override_num_blocks=4)
    scored = score_dataset(
        ds, DiesOnce(settings, str(marker)), concurrency=2, batch_size=8, settings_key=tag
    )
    batches = list(scored.iter_batches(batch_format="pyarrow", batch_size=None))
    out = [row for batch in batches for row in batch.to_pylist()]
    calls = server.count("chat")

    # one actor process died before asking anything; Ray restarted it, ran its batch again
    assert int(marker.read_text()) != os.getpid()
    assert len(out) == len(items)
    server.reset()
    expected = single_process(loop_settings(server), items)
    assert calls == server.count("chat") == 28  # one judge call per good row, as one process
    check_against(out, expected)
    failed = {r["id"]: r for r in out if r["score"] is None or math.isnan(r["score"])}
    assert sorted(failed) == [3, 17]
    assert "response" in failed[3]["error"] and failed[3]["reason"]
    assert "user_input" in failed[17]["error"] and failed[17]["reason"]
    # input columns kept; the key is the content key of the command line's reports
    columns = {"id", "user_input", "response", "key", "score", "reason", "error", "report"}
    for row in out:
        assert set(row) == columns
        assert row["key"] == content_key(row["user_input"], row["response"], tag)
    assert len({row["key"] for row in out}) == 30

    # -- the command line's writers, on these batches ----------------------------------------
    setup = prepare(settings)
    parts = ParquetOutput(tmp_path / "parts")
    assert list(parts.save(batches, setup)) == batches
    saved = pq.read_table(tmp_path / "parts").to_pylist()
    check_against(saved, expected)
    assert {r["format"] for r in saved} == {FORMAT}
    assert sorted(r["row"] for r in saved) == list(range(1, 31))
    done = {r["key"] for r in out if r["error"] is None}
    assert ParquetOutput(tmp_path / "parts").done_keys() == done and len(done) == 28
    # a part without the report's format is not ours: the folder is refused
    pq.write_table(pa.Table.from_pylist(items[:2]), tmp_path / "parts" / "part-x.parquet")
    with pytest.raises(OutputError, match="part-x.parquet, which this command did not write"):
        ParquetOutput(tmp_path / "parts").done_keys()

    report = tmp_path / "scored.jsonl"
    jsonl = JsonlOutput(report, tmp_path / "in")
    assert list(jsonl.save(batches, setup)) == batches
    jsonl.close()
    lines = read_jsonl(report)
    check_against(lines, expected)
    assert {r["format"] for r in lines} == {FORMAT}
    nan = {r["extra"]["id"]: r for r in lines if r["score"] is None}
    assert sorted(nan) == [3, 17] and all(r["error"] and r["reason"] for r in nan.values())
    torn = lines[-1]["extra"]["id"]
    assert torn not in nan
    text = report.read_bytes()
    report.write_bytes(text[: len(text) - 40])  # a crash mid-write: the last line is cut off

    # -- the command line resumes it from a Parquet folder of 40 rows --------------------------
    data = tmp_path / "in"
    data.mkdir()
    everything = with_bad_rows(rows(40))
    for part, start in enumerate((0, 20)):
        table = pa.Table.from_pylist(everything[start : start + 20])
        pq.write_table(table, data / f"p{part}.parquet")
    options = [*server.cli_options(), "--max-retries", "0", "--concurrency", "1"]
    options += ["--cache", tmp_path / "cache", "--no-progress", "--out", report]
    server.reset()
    again = invoke("score", data, *options, "--engine", "ray", "--actors", "1")
    assert again.exit_code == 3, again.output  # rows 3 and 17 are NaN again
    assert "27 row(s) already there" in again.stdout
    # the cut-off row, the 10 new ones and the 2 that failed; only the 10 new ask the judge:
    # the cut-off row's reply is in the cache both actors filled (one store per machine)
    assert "wrote 13 row(s)" in again.stdout
    assert server.count("chat") == 10
    saved = read_jsonl(report)
    assert sorted(r["extra"]["id"] for r in saved) == list(range(40))  # one line per row
    assert torn in {r["extra"]["id"] for r in saved}
    server.reset()
    check_against(saved, single_process(loop_settings(server), everything))
    keys = {r["id"]: content_key(r["user_input"], r["response"], tag) for r in everything}
    assert all(r["key"] == keys[r["extra"]["id"]] for r in saved)

    # the same report and key as one process: `score` without Ray finds every good row there
    good = write_jsonl(tmp_path / "good.jsonl", [r for r in everything if r["id"] not in (3, 17)])
    server.reset()
    local = invoke("score", good, *options)
    assert local.exit_code == 0, local.output
    assert "38 row(s) already there, 0 to score" in local.stdout
    assert server.count() == 0
    assert [r["row"] for r in read_jsonl(report)] == list(range(1, 39))  # now in input order


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
