"""No row is lost when the judge or embeddings server fails: every fault kind, three paths.

Each path scores the same 40 rows against ``LoopbackServer`` through the real openai SDK, with
every fault kind injected on two requests of each endpoint it applies to. Every row must come
back; a row that met only transient faults (429, 500, hang; a malformed chat reply, which is
asked again) must be scored; a row hit by a malformed, miscounted, wrongly sized or NaN embeddings
answer must be NaN with a reason naming that fault. The command line is also killed mid-run and
started again on the same ``--out`` and ``--cache``: it must not ask the judge about rows it
already finished.

Embedding requests are per sample here (``batch_embeddings`` off), so each fault hits one row's
request; requests shared by several samples, and a faulted one retried per sample, are tested
in ``test_batching.py``.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from common import ForkedCommand
from openai import AsyncOpenAI
from ragas.embeddings import OpenAIEmbeddings
from ragas.llms import llm_factory
from typer.testing import CliRunner

from ragas_relevancy_ext import AnswerRelevancy, ResponseRelevancy, reports_for
from ragas_relevancy_ext.cli import app
from ragas_relevancy_ext.testing.faults import (
    OPENAI_FAULT_KINDS,
    RECOVERABLE,
    faults_by_row,
    outcome_problem,
    request_row,
    tag_response,
)
from ragas_relevancy_ext.testing.loopback import Fault, LoopbackServer

N_ROWS = 40
# client seconds before a hung request is abandoned and retried: well above a loaded
# machine's answer time, so no faulted answer is abandoned unread and its fault miscounted
TIMEOUT = 1.0
KINDS = OPENAI_FAULT_KINDS
SIZE_FAULTS = ("wrong_size", "mixed_size")

pytestmark = pytest.mark.slow

Outcome = tuple[float, str | None]  # score (NaN when not scored), error


def targeted_faults() -> list[Fault]:
    """Each kind on two requests of each endpoint it applies to, spread over the early ones.

    A row's two embeddings calls (question, probes) go out together, so their request numbers
    are close. Two size faults on both calls of one row would give halved vectors that agree
    with each other, which no check can see; the two size kinds are therefore scheduled at
    least 20 requests apart.
    """
    faults = []
    for endpoint, kinds in KINDS.items():
        order = [kind for kind in kinds if kind not in SIZE_FAULTS]
        for size, place in zip(SIZE_FAULTS, (0, len(order) // 2 + 1), strict=True):
            if size in kinds:
                order.insert(place, size)
        for j, kind in enumerate(order):
            at = (2 + 5 * j, 3 + 5 * j + 5 * len(order))
            faults.append(Fault(kind, at=at, endpoint=endpoint))  # type: ignore[arg-type]
    return faults


def make_rows(n: int = N_ROWS) -> list[dict[str, str]]:
    topics = ["order A17", "the refund window", "the warranty", "store hours", "gift cards"]
    return [
        {
            "user_input": f"What about {topics[i % len(topics)]} (#{i})?",
            "response": tag_response(i, f"Here is what we know about {topics[i % len(topics)]}."),
        }
        for i in range(n)
    ]


def fault_server(**knobs: Any) -> LoopbackServer:
    return LoopbackServer(
        faults=targeted_faults(), retry_after=0.01, hang_seconds=2.0, **knobs
    ).start()


def openai_client(server: LoopbackServer) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=server.openai_base_url, api_key="test", max_retries=3, timeout=TIMEOUT
    )


def check_outcomes(outcomes: Sequence[Outcome | None], met: Sequence[set[str]]) -> None:
    """Every row present; recoverable faults scored; lasting ones NaN with a naming reason."""
    assert len(outcomes) == N_ROWS and all(o is not None for o in outcomes)
    for index, (outcome, faults) in enumerate(zip(outcomes, met, strict=True)):
        score, error = outcome  # type: ignore[misc]
        assert outcome_problem(faults, score, error) is None, (index, faults, score, error)


# -- abatch_score ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def batch_run() -> Iterator[tuple[list[Outcome], list[set[str]]]]:
    rows = make_rows()
    server = fault_server()
    try:

        async def run() -> list[Any]:
            api = openai_client(server)
            metric = AnswerRelevancy(
                llm=llm_factory("loop-judge", provider="openai", client=api),
                embeddings=OpenAIEmbeddings(client=api, model="loop-embed"),
                batch_embeddings=False,
            )
            return await metric.abatch_score(rows)

        results = asyncio.run(run())
        yield [(r.value, r.report.error) for r in results], faults_by_row(server.log, rows)
    finally:
        server.stop()


def test_abatch_score_meets_every_fault_kind(batch_run) -> None:
    _, met = batch_run
    seen = set().union(*met)
    assert seen >= {f"{k}@{e}" for e, kinds in KINDS.items() for k in kinds}


def test_abatch_score_keeps_every_row_and_names_lasting_faults(batch_run) -> None:
    outcomes, met = batch_run
    check_outcomes(outcomes, met)
    assert any(math.isnan(score) for score, _ in outcomes)
    assert sum(math.isfinite(score) for score, _ in outcomes) >= N_ROWS // 2


# -- ragas.evaluate -------------------------------------------------------------------------


def test_evaluate_keeps_every_row_and_names_lasting_faults() -> None:
    from ragas import EvaluationDataset, evaluate
    from ragas.run_config import RunConfig

    rows = make_rows()
    server = fault_server()
    try:
        api = openai_client(server)
        result = evaluate(
            EvaluationDataset.from_list(rows),
            metrics=[ResponseRelevancy(batch_embeddings=False)],
            llm=llm_factory("loop-judge", provider="openai", client=api),
            embeddings=OpenAIEmbeddings(client=api, model="loop-embed"),
            run_config=RunConfig(max_workers=16),
            raise_exceptions=False,
            show_progress=False,
        )
        met = faults_by_row(server.log, rows)
    finally:
        server.stop()
    scores = list(result["answer_relevancy"])
    reports = reports_for(result)
    assert all(report is not None for report in reports)
    outcomes = [(s, r.error) for s, r in zip(scores, reports, strict=True)]  # type: ignore[union-attr]
    check_outcomes(outcomes, met)
    assert any(math.isnan(s) for s in scores)


# -- the command line, killed and resumed ---------------------------------------------------


def cli(data: Path, out: Path, cache: Path, server: LoopbackServer) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ragas_relevancy_ext",
        "score",
        str(data),
        *server.cli_options(),
        "--max-retries",
        "3",
        "--timeout",
        str(TIMEOUT),
        "--concurrency",
        "2",
        "--out",
        str(out),
        "--cache",
        str(cache),
        "--no-probes",
        "--no-progress",
        "--no-batch-embeddings",
    ]


def last_lines(path: Path) -> dict[int, dict[str, Any]]:
    """Each row's last complete JSONL record (a resumed run appends the rows it retried)."""
    records: dict[int, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            records[int(record["row"])] = record
    return records


@pytest.fixture(scope="module")
def killed_and_resumed(tmp_path_factory) -> Iterator[dict[str, Any]]:
    rows = make_rows()
    folder = tmp_path_factory.mktemp("cli")
    data, out, cache = folder / "rows.jsonl", folder / "out.jsonl", folder / "cache"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}  # local: no key
    server = fault_server(endpoint_latency={"chat": 0.05})
    try:
        command = cli(data, out, cache, server)
        first = ForkedCommand(command[3:], env, folder / "stderr.txt")
        deadline = time.monotonic() + 60
        while first.poll() is None and time.monotonic() < deadline:
            if out.exists() and out.read_bytes().count(b"\n") >= 8:
                break
            time.sleep(0.01)
        assert first.poll() is None, "the first run ended before it could be killed"
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        written = last_lines(out)
        mark = server.count()
        # started again in this process (same command and files; no second interpreter start-up)
        second = CliRunner().invoke(app, command[3:], env={"OPENAI_API_KEY": None})
        log = server.log
        yield {
            "rows": rows,
            "written": written,
            "second": second,
            "before": log[:mark],
            "after": log[mark:],
            "final": last_lines(out),
        }
    finally:
        server.stop()


def test_killed_command_line_leaves_whole_lines_and_resume_finishes(killed_and_resumed) -> None:
    run = killed_and_resumed
    assert 8 <= len(run["written"]) < N_ROWS
    assert sorted(run["final"]) == list(range(1, N_ROWS + 1))
    some_nan = any(r["score"] is None for r in run["final"].values())
    assert run["second"].exit_code == (3 if some_nan else 0), run["second"].output


def test_resume_asks_the_judge_nothing_for_finished_rows(killed_and_resumed) -> None:
    run = killed_and_resumed
    finished = {n - 1 for n, r in run["written"].items() if r.get("error") is None}
    assert finished
    asked = {request_row(r, run["rows"]) for r in run["after"] if r.endpoint == "chat"}
    assert not asked & finished
    embedded = {request_row(r, run["rows"]) for r in run["after"] if r.endpoint == "embeddings"}
    assert not embedded & finished


def test_command_line_keeps_every_row_and_names_lasting_faults(killed_and_resumed) -> None:
    run = killed_and_resumed
    rows = run["rows"]
    finished = {n for n, r in run["written"].items() if r.get("error") is None}
    before, after = faults_by_row(run["before"], rows), faults_by_row(run["after"], rows)
    # a row's faults: those of the run that wrote its last line (a failed row is retried)
    met = [
        before[i] if i + 1 in finished else after[i] | (before[i] & RECOVERABLE)
        for i in range(N_ROWS)
    ]
    outcomes = [
        (math.nan if r["score"] is None else r["score"], r["error"])
        for _, r in sorted(run["final"].items())
    ]
    check_outcomes(outcomes, met)


@pytest.mark.parametrize("malformed", ["http_body", "reply_text"])
def test_max_retries_0_asks_about_an_unreadable_reply_at_most_three_times_a_row(
    tmp_path: Path, malformed: str
) -> None:
    # the ask and the two re-asks for missing probes; --max-retries bounds instructor's too
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in make_rows()[:4]), encoding="utf-8")
    faults = [Fault("malformed", fraction=1.0, endpoint="chat")] if malformed == "http_body" else []
    reply = None if faults else (lambda messages: "Sure! Here are some questions.")
    with LoopbackServer(faults=faults, reply=reply) as server:
        result = CliRunner().invoke(
            app,
            ["score", str(data), *server.cli_options(), "--max-retries", "0", "--no-progress"],
            env={"OPENAI_API_KEY": None},
        )
        asked = server.count("chat")
    assert result.exit_code == 1, result.output  # no row could be scored
    assert 4 <= asked <= 3 * 4
