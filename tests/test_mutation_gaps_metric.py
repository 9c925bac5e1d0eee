"""What the modern metric must keep, found unchecked by mutation testing of ``metric.py``: one
translation per metric and language across calls, a run that ``early_stop`` stops sends one
request at a time and sets ``stop``, rows read ahead, error texts, and each row traced under the
span its caller gave it."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from common import TranslationCounter
from opentelemetry import trace

from ragas_relevancy_ext import AnswerRelevancy
from ragas_relevancy_ext.run.streaming import EarlyStop
from ragas_relevancy_ext.scoring import tracing
from ragas_relevancy_ext.scoring.tracing import SAMPLE_SPAN
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge

ROWS = [
    {"user_input": f"Where is order A{i}?", "response": f"Order A{i} shipped on Monday."}
    for i in range(6)
]


class Unreachable(PretendJudge):
    """A judge that never answers: every request fails as a connection error after a turn of
    the event loop, so requests sent together overlap (``peak``)."""

    async def agenerate(self, prompt: str, response_model: Any) -> Any:
        self.calls += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(0)
            raise ConnectionError("judge unreachable")
        finally:
            self.in_flight -= 1


def test_a_named_language_is_translated_once_per_metric_across_scores() -> None:
    once = TranslationCounter()
    AnswerRelevancy(llm=once, embeddings=HashEmbeddings(), language="spanish").score(**ROWS[0])
    assert once.translations > 0
    judge = TranslationCounter()
    metric = AnswerRelevancy(llm=judge, embeddings=HashEmbeddings(), language="spanish")
    first = metric.score(**ROWS[0])
    metric.score(**ROWS[1])
    assert judge.translations == once.translations
    assert first.report.probe_prompt == "diverse (spanish)"


def test_a_named_language_is_translated_once_per_metric_across_batches() -> None:
    once = TranslationCounter()
    AnswerRelevancy(llm=once, embeddings=HashEmbeddings(), language="spanish").batch_score(ROWS[:1])
    judge = TranslationCounter()
    metric = AnswerRelevancy(llm=judge, embeddings=HashEmbeddings(), language="spanish")
    metric.batch_score(ROWS[:3])
    metric.batch_score(ROWS[3:])
    assert judge.translations == once.translations > 0


def test_early_stop_sends_one_request_at_a_time_and_sets_stop() -> None:
    judge = Unreachable()
    metric = AnswerRelevancy(llm=judge, embeddings=HashEmbeddings(), max_concurrency=4)
    stop = asyncio.Event()

    async def run() -> list[Any]:
        return [
            result
            async for _, result in metric.ascore_each(ROWS, stop=stop, early_stop=EarlyStop(rows=2))
        ]

    results = asyncio.run(run())
    assert stop.is_set()
    assert 2 <= len(results) < len(ROWS)
    assert all(math.isnan(r.value) for r in results)
    assert judge.peak == 1


def test_without_early_stop_requests_go_at_once() -> None:
    judge = Unreachable()
    metric = AnswerRelevancy(llm=judge, embeddings=HashEmbeddings(), max_concurrency=4)
    results = metric.batch_score(ROWS)
    assert len(results) == len(ROWS) and all(math.isnan(r.value) for r in results)
    assert judge.peak > 1


class CountingEmbeddings(HashEmbeddings):
    """HashEmbeddings that record how many texts each request carried."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[int] = []

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        self.requests.append(len(texts))
        return [self.embed_text(text) for text in texts]

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        return (await self.aembed_texts([text]))[0]


def test_batch_embeddings_shares_requests_or_sends_two_per_sample() -> None:
    for shared in (True, False):
        embeddings = CountingEmbeddings()
        metric = AnswerRelevancy(llm=PretendJudge(), embeddings=embeddings, batch_embeddings=shared)
        metric.batch_score(ROWS)
        assert sum(embeddings.requests) == (1 + 3) * len(ROWS)
        if shared:
            assert len(embeddings.requests) < 2 * len(ROWS)
        else:
            assert sorted(embeddings.requests) == [1] * len(ROWS) + [3] * len(ROWS)


def test_max_concurrency_bounds_the_rows_read_ahead() -> None:
    read: list[int] = []

    def rows() -> Any:
        for i, row in enumerate(ROWS):
            read.append(i)
            yield row

    metric = AnswerRelevancy(
        llm=PretendJudge(), embeddings=HashEmbeddings(), max_concurrency=1, batch_embeddings=False
    )
    seen: list[int] = []

    async def run() -> None:
        async for index, _ in metric.ascore_each(rows()):
            seen.append(len(read))
            assert index < len(ROWS)

    asyncio.run(run())
    assert seen[0] <= 2 and len(seen) == len(ROWS)


def test_stop_set_by_the_caller_drops_samples_not_started() -> None:
    metric = AnswerRelevancy(
        llm=PretendJudge(), embeddings=HashEmbeddings(), max_concurrency=1, batch_embeddings=False
    )
    stop = asyncio.Event()

    async def run() -> list[int]:
        done = []
        async for index, _ in metric.ascore_each(ROWS, stop=stop):
            done.append(index)
            stop.set()
        return done

    done = asyncio.run(run())
    assert 1 <= len(done) < len(ROWS)


def test_rows_that_are_not_mappings_are_named_and_kept() -> None:
    metric = AnswerRelevancy(llm=PretendJudge(), embeddings=HashEmbeddings())
    (result,) = metric.batch_score([["Where?", "There."]])  # type: ignore[list-item]
    assert math.isnan(result.value)
    assert result.report.error == "TypeError: row must be a mapping, got list"
    assert result.report.user_input == ""
    assert result.report.response == "['Where?', 'There.']"


def test_sync_batch_score_from_a_running_loop_points_to_abatch_score() -> None:
    metric = AnswerRelevancy(llm=PretendJudge(), embeddings=HashEmbeddings())

    async def call() -> str:
        try:
            metric.batch_score(ROWS[:1])
        except RuntimeError as exc:
            return str(exc)
        return ""

    assert asyncio.run(call()) == (
        "Cannot call sync batch_score() from an async context. Use abatch_score() instead."
    )


def test_other_stock_arguments_reach_stock() -> None:
    metric = AnswerRelevancy(
        llm=PretendJudge(), embeddings=HashEmbeddings(), allowed_values=(0.0, 2.0)
    )
    assert metric.allowed_values == (0.0, 2.0)


def test_each_row_is_traced_under_the_span_its_caller_gave_it(spans: Any) -> None:
    exporter = spans
    tracer = trace.get_tracer("caller")
    parents = [tracer.start_span(f"row {i}") for i in range(3)]
    metric = AnswerRelevancy(llm=PretendJudge(), embeddings=HashEmbeddings())

    async def batch() -> None:
        with tracing.row_parents([trace.set_span_in_context(p) for p in parents]):
            await metric.abatch_score(ROWS[:3])

    asyncio.run(batch())
    for parent in parents:
        parent.end()
    samples = [s for s in exporter.get_finished_spans() if s.name.startswith(SAMPLE_SPAN)]
    by_parent = {s.parent.span_id: s for s in samples if s.parent is not None}
    assert set(by_parent) == {p.get_span_context().span_id for p in parents}


def _paced_runs(monkeypatch: Any) -> list[Any]:
    """Record the key's limit every request of a run waits for."""
    from ragas_relevancy_ext.run.limits import KeyLimit

    seen: list[Any] = []

    async def wait(self: KeyLimit, tokens: int) -> int:
        seen.append(self)
        return self.changes

    monkeypatch.setattr(KeyLimit, "wait", wait)
    return seen


def test_one_sample_keeps_to_the_metric_rate_limits(monkeypatch: Any) -> None:
    """``ascore`` runs its sample under the metric's ``rate_limits``."""
    from ragas_relevancy_ext.run.limits import RateLimits

    seen = _paced_runs(monkeypatch)
    metric = AnswerRelevancy(
        PretendJudge(), HashEmbeddings(), probe_prompt="stock", rate_limits=RateLimits(rpm=60)
    )
    asyncio.run(metric.ascore(ROWS[0]["user_input"], ROWS[0]["response"]))
    judge = [limit for limit in seen if limit.name.endswith("/chat/completions no key")]
    assert len(judge) == 3 and all(limit.rpm == 60 for limit in judge)


def test_a_batch_keeps_to_the_metric_rate_limits(monkeypatch: Any) -> None:
    """``abatch_score`` runs its rows under the metric's ``rate_limits``."""
    from ragas_relevancy_ext.run.limits import RateLimits

    seen = _paced_runs(monkeypatch)
    metric = AnswerRelevancy(
        PretendJudge(), HashEmbeddings(), probe_prompt="stock", rate_limits=RateLimits(tpm=9000)
    )
    asyncio.run(metric.abatch_score(ROWS[:2]))
    judge = [limit for limit in seen if limit.name.endswith("/chat/completions no key")]
    assert len(judge) == 6 and all(limit.tpm == 9000 for limit in judge)
