"""Calls in flight, counted: max_concurrency bounds judge and embeddings calls in ``ascore``,
``abatch_score`` and ``ragas.evaluate``; ``ascore_each`` cancels what it started when the caller
stops early."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from ragas import EvaluationDataset, evaluate
from ragas.run_config import RunConfig

from ragas_relevancy_ext import AnswerRelevancy, ResponseRelevancy
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

QUESTION = "Where is order A17?"
ROWS = [
    {"user_input": f"{QUESTION} ({i})", "response": f"Order A17 shipped on {i + 1} March."}
    for i in range(5)
]


class InFlight:
    """Counts calls in flight; each call holds its place for a few loop turns, so that calls
    allowed to overlap do overlap."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.calls = 0

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        self.now += 1
        self.calls += 1
        self.peak = max(self.peak, self.now)
        try:
            for _ in range(5):  # held over turns of the loop, so calls started together overlap
                await asyncio.sleep(0)
            yield
        finally:
            self.now -= 1


class CountingJudge(PretendJudge):
    def __init__(self) -> None:
        super().__init__()
        self.flight = InFlight()

    async def agenerate(self, prompt: str, response_model: Any) -> Any:
        async with self.flight.hold():
            return await super().agenerate(prompt, response_model)


class CountingEmbeddings(HashEmbeddings):
    def __init__(self) -> None:
        super().__init__(32)
        self.flight = InFlight()

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        async with self.flight.hold():
            return self.embed_text(text)

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        async with self.flight.hold():
            return [self.embed_text(t) for t in texts]


def metric(limit: int, strictness: int = 3) -> tuple[AnswerRelevancy, CountingJudge, Any]:
    judge, embeddings = CountingJudge(), CountingEmbeddings()
    made = AnswerRelevancy(
        llm=judge,
        embeddings=embeddings,
        strictness=strictness,
        probe_prompt="stock",
        max_concurrency=limit,
    )
    return made, judge, embeddings


@pytest.mark.parametrize(
    ("limit", "judge_peak", "embeddings_peak"),
    [(1, 1, 1), (2, 2, 2), (16, 6, 2)],  # one sample: 6 judge calls, 2 embeddings calls
)
def test_ascore_bounds_judge_and_embeddings_calls(limit, judge_peak, embeddings_peak):
    scorer, judge, embeddings = metric(limit, strictness=6)
    result = asyncio.run(scorer.ascore(QUESTION, "Order A17 shipped on 3 March."))
    assert result.value > 0
    assert (judge.flight.calls, embeddings.flight.calls) == (6, 2)
    assert (judge.flight.peak, embeddings.flight.peak) == (judge_peak, embeddings_peak)


@pytest.mark.parametrize("limit", [1, 3])
def test_abatch_score_bounds_judge_and_embeddings_calls_across_samples(limit):
    scorer, judge, embeddings = metric(limit)
    results = asyncio.run(scorer.abatch_score(ROWS))
    assert all(r.value > 0 for r in results)
    assert judge.flight.calls == 15 and embeddings.flight.calls >= 2  # questions, probes
    # judge calls all queue at once, so they fill the bound; embeddings calls start as samples
    # finish their probes, so they may not
    assert judge.flight.peak == limit and 1 <= embeddings.flight.peak <= limit


def test_abatch_score_without_a_tight_limit_runs_samples_together():
    scorer, judge, embeddings = metric(16)
    asyncio.run(scorer.abatch_score(ROWS))
    # 15 judge calls queue at once and all go (a judge with no HTTP client says no limits to
    # wait for); then the embeddings calls, together
    assert judge.flight.peak == judge.flight.calls == 15
    assert embeddings.flight.peak > 1


def _evaluate(
    limit: int, workers: int, shared: bool = True
) -> tuple[CountingJudge, CountingEmbeddings]:
    judge, embeddings = CountingJudge(), CountingEmbeddings()
    scored = ResponseRelevancy(
        strictness=4, probe_prompt="stock", max_concurrency=limit, batch_embeddings=shared
    )
    result = evaluate(
        EvaluationDataset.from_list(ROWS[:3]),
        metrics=[scored],
        llm=judge,
        embeddings=embeddings,
        run_config=RunConfig(max_workers=workers),
        show_progress=False,
    )
    assert all(score > 0 for score in result["answer_relevancy"])
    assert judge.flight.calls == 12 and embeddings.flight.calls >= 1  # texts may be batched
    return judge, embeddings


@pytest.mark.parametrize(("limit", "workers"), [(1, 16), (2, 16), (3, 16), (16, 2), (16, 1)])
def test_evaluate_bounds_calls_across_rows(limit, workers):
    # the run's rows share one bound: max_concurrency, or max_workers when it is lower
    judge, embeddings = _evaluate(limit, workers)
    bound = min(limit, workers)
    assert judge.flight.peak == bound and 1 <= embeddings.flight.peak <= bound


def test_evaluate_without_a_tight_limit_runs_rows_together():
    judge, embeddings = _evaluate(16, 16)
    assert judge.flight.peak > 4  # more than one row's judge calls at once


def test_evaluate_shares_embedding_requests_across_rows_unless_told_not_to():
    _, shared = _evaluate(16, 16)
    _, alone = _evaluate(16, 16, shared=False)
    assert alone.flight.calls == 2 * 3  # the question, then the probes, per row
    assert shared.flight.calls < alone.flight.calls


# --- ascore_each: a caller that stops early leaves nothing running -----------------------------


class WaitingJudge(PretendJudge):
    """Answers the row marked "fast" at once; every other call waits until cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = 0
        self.cancelled = 0

    async def agenerate(self, prompt: str, response_model: Any) -> Any:
        if "fast" not in prompt:
            self.waiting += 1
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        return await super().agenerate(prompt, response_model)


def _sample_tasks() -> list[asyncio.Task[Any]]:
    """Tasks still running a coroutine (an async generator's closing step is not one)."""
    current = asyncio.current_task()
    return [
        t for t in asyncio.all_tasks() if t is not current and hasattr(t.get_coro(), "cr_frame")
    ]


def _rows() -> list[dict[str, str]]:
    rows = [dict(row) for row in ROWS]
    rows[2]["response"] = "The fast order shipped."
    return rows


def test_ascore_each_cancels_pending_samples_when_the_caller_stops():
    judge = WaitingJudge()
    # requests of its own: a shared request would wait for the texts of the rows still judged
    scorer = AnswerRelevancy(
        judge, HashEmbeddings(), strictness=2, probe_prompt="stock", batch_embeddings=False
    )

    async def take_first() -> tuple[int, list[asyncio.Task[Any]]]:
        async with contextlib.aclosing(scorer.ascore_each(_rows())) as each:
            index, _ = await anext(each)
        for _ in range(5):  # let the cancellations land
            await asyncio.sleep(0)
        return index, _sample_tasks()

    index, still_running = asyncio.run(take_first())
    assert index == 2
    assert judge.waiting == 8  # 4 slow rows, 2 probes each
    assert judge.cancelled == 8
    assert still_running == []


def test_ascore_each_cancels_pending_samples_when_the_caller_fails():
    judge = WaitingJudge()
    scorer = AnswerRelevancy(
        judge, HashEmbeddings(), strictness=2, probe_prompt="stock", batch_embeddings=False
    )

    async def fail_on_first() -> None:
        async with contextlib.aclosing(scorer.ascore_each(_rows())) as each:
            async for _ in each:
                raise KeyError("the writer broke")

    async def run() -> int:
        with pytest.raises(KeyError, match="the writer broke"):
            await fail_on_first()
        for _ in range(5):
            await asyncio.sleep(0)
        return len(_sample_tasks())

    assert asyncio.run(run()) == 0
    assert judge.cancelled == judge.waiting == 8
