"""Scoring on Ray Data actors: same scores as one process, every row back, resume, a killed actor.

Ray runs on this machine once for the module (``ray.init(num_cpus=2)``). These tests need the
``[ray]`` extra and fail, never skip, without it: ``pip install -e ".[test,local,ray]"``.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
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
from ragas_relevancy_ext.cli.ray_score import ParquetOutput
from ragas_relevancy_ext.cli.setup import Settings, prepare
from ragas_relevancy_ext.ray_engine import content_key, score_dataset
from ragas_relevancy_ext.testing.loopback import LoopbackServer

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = Settings(judge="offline", embeddings="hash")
TOPICS = ["order A17", "a refund", "the warranty", "card payments", "delivery", "returns"]

# Helpers below are shipped to the actors by value: the actors cannot import this test file.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
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
    return Settings(
        judge="openai:loop-judge",
        base_url=server.openai_base_url,
        embeddings="openai:loop-embed",
        max_retries=0,
        concurrency=4,
        **changes,
    )


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
    """Every row once, and each row's score and report as one process gives them."""
    assert sorted(r["id"] for r in out) == sorted(expected)
    for row in out:
        report = expected[row["id"]]
        assert same_score(row["score"], report.score), (row, report)
        got = json.loads(row["report"])
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


def test_a_killed_actor_is_restarted_every_row_comes_back_scored_as_in_one_process(tmp_path):
    items = rows(40)
    items[3]["response"] = ""  # ValueError in the metric
    items[17]["user_input"] = None  # TypeError in the metric
    marker = tmp_path / "killed"
    ds = ray.data.from_items(items, override_num_blocks=4)
    scored = score_dataset(ds, DiesOnce(OFFLINE, str(marker)), concurrency=1, batch_size=8)
    out = scored.take_all()

    # one actor process died mid-batch; Ray restarted it and ran the batch again
    assert int(marker.read_text()) != os.getpid()
    assert len(out) == len(items)
    check_against(out, single_process(OFFLINE, items))
    failed = {r["id"]: r for r in out if r["score"] is None or math.isnan(r["score"])}
    assert sorted(failed) == [3, 17]
    assert "response" in failed[3]["error"] and failed[3]["reason"]
    assert "user_input" in failed[17]["error"] and failed[17]["reason"]
    # input columns kept; the key is the content key
    columns = {"id", "user_input", "response", "key", "score", "reason", "error", "report"}
    for row in out:
        assert set(row) == columns
        assert row["key"] == content_key(row["user_input"], row["response"])


# -- the command line --------------------------------------------------------------------------


def test_cli_actors_share_one_server_and_cache_and_resume_scores_only_missing_rows(
    tmp_path, server
):
    # --concurrency 1: batches of 8 rows, so both actors get some of the 20
    options = [*server.cli_options(), "--max-retries", "0", "--concurrency", "1"]
    options += ["--engine", "ray", "--actors", "2", "--cache", tmp_path / "cache"]
    out = tmp_path / "scored.jsonl"
    first = invoke("score", write_jsonl(tmp_path / "part.jsonl", rows(20)), *options, "--out", out)
    assert first.exit_code == 0, first.output
    assert "wrote 20 row(s)" in first.stdout
    assert server.count("chat") == 20  # diverse: one judge call per row
    torn = read_jsonl(out)[-1]["id"]
    text = out.read_bytes()
    out.write_bytes(text[: len(text) - 40])  # a crash mid-write: the last line is cut off
    server.reset()

    again = invoke("score", write_jsonl(tmp_path / "all.jsonl", rows(30)), *options, "--out", out)
    assert again.exit_code == 0, again.output
    assert "19 row(s) already there" in again.stdout
    assert "wrote 11 row(s)" in again.stdout  # the cut-off row and the 10 new ones
    # the 10 new rows ask the judge; the cut-off row's reply comes from the cache that the
    # first run's actors filled (one store for every actor on this machine)
    assert server.count("chat") == 10
    saved = read_jsonl(out)
    assert sorted(r["id"] for r in saved) == list(range(30))
    assert torn in {r["id"] for r in saved}
    check_against(saved, single_process(loop_settings(server), rows(30)))


def test_cli_reads_a_parquet_folder_and_writes_parquet_parts_and_refuses_foreign_output(tmp_path):
    data = tmp_path / "in"
    data.mkdir()
    for part, start in enumerate((0, 12)):
        pq.write_table(pa.Table.from_pylist(rows(12, start)), data / f"p{part}.parquet")
    out = tmp_path / "out"
    options = ["--judge", "offline", "--embeddings", "hash", "--engine", "ray", "--actors", "1"]
    done = invoke("score", data, *options, "--out", out, "--no-progress")
    assert done.exit_code == 0, done.output
    saved = pq.read_table(out).to_pylist()
    check_against(saved, single_process(OFFLINE, rows(24)))
    # a re-run would skip all 24: their keys are read back from the parts
    assert ParquetOutput(out).done_keys() == {r["key"] for r in saved} and len(saved) == 24

    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("mine")
    refused = invoke("score", data, *options, "--out", foreign)
    assert refused.exit_code == 2
    assert "did not write" in refused.stderr
    assert (foreign / "todo.txt").read_text() == "mine" and len(list(foreign.iterdir())) == 1


def test_cli_refuses_a_jsonl_out_it_did_not_write_untouched(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", rows(3))
    before = path.read_bytes()
    refused = invoke("score", path, "--embeddings", "hash", "--engine", "ray", "--out", path)
    assert refused.exit_code == 2 and "line 1 is not a scored row" in refused.stderr
    assert path.read_bytes() == before


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
