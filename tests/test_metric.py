"""The drop-in modern metric: same calls as stock, probe-level results, checked inputs."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest
from common import CountingEmbeddings
from ragas.embeddings.base import BaseRagasEmbedding
from ragas.metrics.collections import AnswerRelevancy as StockAnswerRelevancy
from ragas.metrics.result import MetricResult

from ragas_relevancy_ext import (
    AnswerRelevancy,
    EmbeddingShapeError,
    Probe,
    RelevancyReport,
    RelevancyResult,
    ResponseRelevancy,
)
from ragas_relevancy_ext.run.streaming import EarlyStop
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge, ScriptedJudge

QUESTION = "Where is order A17?"


def stock_mode(judge, embeddings=None, **kwargs) -> AnswerRelevancy:
    return AnswerRelevancy(
        llm=judge, embeddings=embeddings or HashEmbeddings(), probe_prompt="stock", **kwargs
    )


class ListCollapsingEmbeddings(BaseRagasEmbedding):
    """Answers a list of texts with ONE vector, as gemini-embedding-2 does."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.inner = HashEmbeddings(width)

    def embed_text(self, text, **kwargs):
        return self.inner.embed_text(text)

    async def aembed_text(self, text, **kwargs):
        return self.inner.embed_text(text)

    async def aembed_texts(self, texts, **kwargs):
        return [self.inner.embed_text(" ".join(texts))]


class FixedOutputEmbeddings(BaseRagasEmbedding):
    """A good vector for the question; the given vectors for the probes (to test the checks)."""

    def __init__(self, vectors):
        super().__init__()
        self.vectors = vectors

    def embed_text(self, text, **kwargs):
        return [1.0, 0.0]

    async def aembed_text(self, text, **kwargs):
        return [1.0, 0.0]

    async def aembed_texts(self, texts, **kwargs):
        return [[1.0, 0.0]] if len(texts) == 1 else self.vectors


def test_is_a_drop_in_subclass_with_the_stock_constructor():
    metric = AnswerRelevancy(PretendJudge(), HashEmbeddings())
    assert isinstance(metric, StockAnswerRelevancy)
    assert metric.name == "answer_relevancy"
    assert metric.strictness == 3
    named = AnswerRelevancy(
        llm=PretendJudge(), embeddings=HashEmbeddings(), name="ar", strictness=5
    )
    assert (named.name, named.strictness) == ("ar", 5)


def test_rejects_legacy_components_like_stock():
    with pytest.raises(ValueError, match="InstructorLLM"):
        AnswerRelevancy(llm=object(), embeddings=HashEmbeddings())


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3"])
def test_strictness_must_be_a_positive_whole_number(bad):
    with pytest.raises(ValueError, match="strictness"):
        AnswerRelevancy(PretendJudge(), HashEmbeddings(), strictness=bad)


def test_unknown_probe_prompt_name_is_refused():
    with pytest.raises(ValueError, match="probe_prompt must be one of"):
        AnswerRelevancy(PretendJudge(), HashEmbeddings(), probe_prompt="fancy")
    with pytest.raises(TypeError, match="probe_prompt"):
        AnswerRelevancy(PretendJudge(), HashEmbeddings(), probe_prompt=42)


@pytest.mark.parametrize("bad", [0, -3, 1.5])
def test_max_concurrency_must_be_positive(bad):
    with pytest.raises(ValueError, match="max_concurrency"):
        AnswerRelevancy(PretendJudge(), HashEmbeddings(), max_concurrency=bad)


def test_score_returns_a_metric_result_with_a_report():
    judge = ScriptedJudge([("Where is order A17?", 0), ("Where is my order?", 0), ("Cats?", 0)])
    result = stock_mode(judge).score(user_input=QUESTION, response="Order A17 shipped on 3 March.")
    assert isinstance(result, RelevancyResult) and isinstance(result, MetricResult)
    report = result.report
    assert isinstance(report, RelevancyReport)
    assert [p.question for p in report.probes] == [
        "Where is order A17?",
        "Where is my order?",
        "Cats?",
    ]
    assert all(isinstance(p, Probe) for p in report.probes)
    assert report.probes[0].cosine == pytest.approx(1.0)
    assert result.value == pytest.approx(sum(p.cosine for p in report.probes) / 3)
    assert report.score == result.value
    assert (report.user_input, report.strictness, report.probe_prompt) == (QUESTION, 3, "stock")
    assert report.judge_calls == 3 and report.all_noncommittal is False
    # the probe about cats pulled the score down, and the reason says so
    assert (
        'The probe "Cats?" (similarity ' in result.reason and "pulled it down by" in result.reason
    )


def test_report_to_dict_is_json_and_round_trips():
    judge = ScriptedJudge([("Where is order A17?", 0)] * 3)
    report = stock_mode(judge).score(user_input=QUESTION, response="It shipped.").report
    data = json.loads(json.dumps(report.to_dict()))
    assert data["probes"][0] == {
        "question": "Where is order A17?",
        "noncommittal": 0,
        "cosine": pytest.approx(1.0),
        "language": "en",
    }
    assert RelevancyReport.from_dict(data).probes == report.probes
    text = str(report)
    assert "Where is order A17?" in text and "cosine" in text and "reason:" in text


def test_all_noncommittal_scores_zero_with_a_reason():
    judge = ScriptedJudge([("Where is order A17?", 1)] * 3)
    result = stock_mode(judge).score(user_input=QUESTION, response="I do not know.")
    assert result.value == 0.0
    assert result.report.all_noncommittal is True
    assert "noncommittal" in result.reason
    # the cosines are still reported, so a reader sees the probes were on topic
    assert all(p.cosine == pytest.approx(1.0) for p in result.report.probes)


def test_empty_probes_are_dropped_and_none_left_is_not_measured():
    judge = ScriptedJudge([("", 0), ("Where is order A17?", 0), ("", 0)])
    result = stock_mode(judge).score(user_input=QUESTION, response="It shipped.")
    assert [p.question for p in result.report.probes] == ["Where is order A17?"]
    assert result.value == pytest.approx(1.0)

    judge = ScriptedJudge([("", 0)] * 3)
    result = stock_mode(judge).score(user_input=QUESTION, response="It shipped.")
    assert math.isnan(result.value) and result.report.probes == []
    assert result.reason.startswith("Not scored") and "no usable probe" in result.reason


@pytest.mark.parametrize(
    ("user_input", "response", "error", "field"),
    [
        ("", "An answer.", ValueError, "user_input"),
        ("   \n", "An answer.", ValueError, "user_input"),
        ("A question?", "", ValueError, "response"),
        ("A question?", " \t", ValueError, "response"),
        (None, "An answer.", TypeError, "user_input"),
        ("A question?", 42, TypeError, "response"),
        ("A question?", ["a", "list"], TypeError, "response"),
    ],
)
def test_bad_input_is_refused_before_any_call(user_input, response, error, field):
    judge = ScriptedJudge([])
    with pytest.raises(error, match=field):
        stock_mode(judge).score(user_input=user_input, response=response)
    assert judge.calls == 0


def test_stock_rejects_empty_input_with_the_same_error():
    stock = StockAnswerRelevancy(llm=ScriptedJudge([]), embeddings=HashEmbeddings())
    with pytest.raises(ValueError, match="user_input cannot be empty"):
        stock.score(user_input="", response="x")
    with pytest.raises(ValueError, match="user_input cannot be empty"):
        stock_mode(ScriptedJudge([])).score(user_input="", response="x")


def test_collapsed_embeddings_name_the_problem_where_stock_dies_in_numpy():
    replies = [("Where is order A17?", 0)] * 3
    with pytest.raises(ValueError, match="not aligned|cannot reshape"):
        StockAnswerRelevancy(
            llm=ScriptedJudge(replies), embeddings=ListCollapsingEmbeddings()
        ).score(user_input=QUESTION, response="It shipped.")
    with pytest.raises(EmbeddingShapeError) as caught:
        stock_mode(ScriptedJudge(replies), ListCollapsingEmbeddings()).score(
            user_input=QUESTION, response="It shipped."
        )
    message = str(caught.value)
    assert "ListCollapsingEmbeddings" in message
    assert "1 vector(s) of length(s) [8] for 3 text(s)" in message
    assert "OneTextPerCall" in message


@pytest.mark.parametrize(
    ("vectors", "expected"),
    [
        ([[1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0]], r"different lengths \[2, 3, 2\]"),
        ([[math.nan, 1.0], [1.0, 0.0], [1.0, 0.0]], "NaN or infinite values for text 0"),
        ([[1.0, 0.0], [math.inf, 0.0], [1.0, 0.0]], "NaN or infinite values for text 1"),
        ([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]], "all-zero vector for text 2"),
        ([[], [], []], "empty vectors"),
        ([["a", "b"]] * 3, "not a list of numeric vectors"),
        ([[1.0, 0.0, 0.0]] * 3, "length 2 for the question but vectors of length 3"),
    ],
)
def test_every_vector_is_checked_before_arithmetic(vectors, expected):
    metric = stock_mode(ScriptedJudge([("q one?", 0)] * 3), FixedOutputEmbeddings(vectors))
    with pytest.raises(EmbeddingShapeError, match=expected):
        metric.score(user_input=QUESTION, response="It shipped.")


def test_judge_calls_of_one_sample_run_concurrently_and_keep_order():
    class InFlightJudge(ScriptedJudge):
        in_flight = peak = 0

        async def agenerate(self, prompt, response_model):
            type(self).in_flight += 1
            type(self).peak = max(type(self).peak, type(self).in_flight)
            try:
                return await super().agenerate(prompt, response_model)
            finally:
                type(self).in_flight -= 1

    replies = [(f"Question {i}?", 0) for i in range(5)]
    judge = InFlightJudge(replies)  # each reply yields to the loop once: calls overlap
    result = stock_mode(judge, strictness=5).score(user_input=QUESTION, response="It shipped.")
    assert [p.question for p in result.report.probes] == [q for q, _ in replies]
    assert judge.calls == 5
    assert InFlightJudge.peak == 5, f"peak {InFlightJudge.peak} of 5 calls in flight"


def test_max_concurrency_bounds_judge_calls_in_flight():
    class CountingJudge(ScriptedJudge):
        in_flight = 0
        peak = 0

        async def agenerate(self, prompt, response_model):
            type(self).in_flight += 1
            type(self).peak = max(type(self).peak, type(self).in_flight)
            try:
                await asyncio.sleep(0)  # the other calls' turn
                return await super().agenerate(prompt, response_model)
            finally:
                type(self).in_flight -= 1

    judge = CountingJudge([("Where is order A17?", 0)] * 12)
    metric = stock_mode(judge, max_concurrency=2)
    results = metric.batch_score([{"user_input": QUESTION, "response": "It shipped."}] * 4)
    assert len(results) == 4 and CountingJudge.peak == 2


def test_batch_keeps_every_row_when_one_fails():
    judge = PretendJudge()
    rows = [
        {"user_input": QUESTION, "response": "Order A17 shipped on 3 March."},
        {"user_input": "", "response": "Order A17 shipped."},
        {"user_input": QUESTION, "response": None},
        {"user_input": QUESTION, "response": "We sell gift cards."},
    ]
    results = AnswerRelevancy(judge, HashEmbeddings()).batch_score(rows)
    assert len(results) == 4
    assert results[0].value > results[3].value > 0
    assert math.isnan(results[1].value) and "user_input cannot be empty" in results[1].reason
    assert math.isnan(results[2].value) and "response must be a string" in results[2].reason
    assert results[1].report.to_dict()["score"] is None


def test_batch_rows_with_unknown_fields_are_named():
    results = AnswerRelevancy(PretendJudge(), HashEmbeddings()).batch_score(
        [{"question": QUESTION, "answer": "It shipped."}]
    )
    assert math.isnan(results[0].value)
    assert "unexpected field(s) ['answer', 'question']" in results[0].reason


def test_batch_score_matches_single_scores():
    rows = [
        {"user_input": QUESTION, "response": answer}
        for answer in ["Order A17 shipped on 3 March.", "We sell gift cards.", "I do not know."]
    ]
    metric = AnswerRelevancy(PretendJudge(), HashEmbeddings())
    batch = [r.value for r in metric.batch_score(rows)]
    single = [metric.score(**row).value for row in rows]
    assert batch == single


def test_seed_003_order_a17_ranks_on_topic_over_off_topic_over_evasive():
    metric = AnswerRelevancy(PretendJudge(), HashEmbeddings(), probe_prompt="stock")
    on, off, evasive = (
        metric.score(user_input=QUESTION, response=answer).value
        for answer in ["Order A17 shipped on 3 March.", "We sell gift cards.", "I do not know."]
    )
    assert on > off > evasive == 0.0


def test_sync_score_from_a_running_loop_points_to_ascore():
    metric = AnswerRelevancy(PretendJudge(), HashEmbeddings())

    async def inside():
        with pytest.raises(RuntimeError, match="ascore"):
            metric.score(user_input=QUESTION, response="It shipped.")
        return await metric.ascore(QUESTION, "Order A17 shipped on 3 March.")

    assert asyncio.run(inside()).value > 0


def test_modern_embeddings_on_a_sync_client_are_called_through_their_sync_method():
    class SyncClientEmbeddings(HashEmbeddings):
        is_async = False

        async def aembed_texts(self, texts, **kwargs):
            raise TypeError("Cannot use aembed_texts() with a synchronous client")

    judge = ScriptedJudge([("Where is order A17?", 0)] * 3)
    result = stock_mode(judge, SyncClientEmbeddings()).score(
        user_input=QUESTION, response="It shipped."
    )
    assert result.value == pytest.approx(1.0)


def test_ascore_each_yields_every_sample_as_it_finishes():
    """A sample whose judge has not answered holds back no other: the test releases the first
    sample's judge only once it holds the other two, so they must come out first."""
    released = asyncio.Event()

    class HeldFirst(PretendJudge):
        async def agenerate(self, prompt, response_model):
            if "first sample" in prompt:
                await released.wait()
            return await super().agenerate(prompt, response_model)

    rows = [
        {"user_input": QUESTION, "response": "The first sample shipped."},
        {"user_input": QUESTION, "response": "Order A17 shipped on 3 March."},
        {"user_input": "", "response": "Broken row."},
    ]
    metric = AnswerRelevancy(HeldFirst(), HashEmbeddings())

    async def collect():
        samples = metric.ascore_each(rows)
        try:
            # a guard, not a measure: were the others held behind the first, this would wait
            # forever, so after 120 s the test fails instead
            seen = [await asyncio.wait_for(anext(samples), timeout=120) for _ in range(2)]
            released.set()
            seen += [item async for item in samples]
        finally:
            await samples.aclose()
        return seen

    seen = asyncio.run(collect())
    assert [i for i, _ in seen[:2]] in ([1, 2], [2, 1]) and seen[2][0] == 0
    assert len(seen) == 3
    by_index = dict(seen)
    assert math.isnan(by_index[2].value) and by_index[1].value > 0 and by_index[0].value > 0


def test_options_changed_on_the_instance_are_checked_where_they_are_set():
    metric = AnswerRelevancy(PretendJudge(), HashEmbeddings())
    with pytest.raises(ValueError, match="strictness must be a whole number >= 1, got 0"):
        metric.strictness = 0
    with pytest.raises(ValueError, match="max_concurrency must be a whole number >= 1, got 0"):
        metric.max_concurrency = 0
    with pytest.raises(ValueError, match="batch_embeddings must be True or False, got 'no'"):
        metric.batch_embeddings = "no"
    assert (metric.strictness, metric.max_concurrency, metric.batch_embeddings) == (3, 16, True)
    legacy = ResponseRelevancy()
    with pytest.raises(ValueError, match="strictness must be a whole number >= 1, got True"):
        legacy.strictness = True
    legacy.language = " Japanese "
    assert legacy.language == "japanese" and legacy.strictness == 3


def test_a_failed_rows_report_keeps_every_field_of_the_row_and_the_failure():
    judge = ScriptedJudge([RuntimeError("judge down")])
    metric = AnswerRelevancy(judge, HashEmbeddings(), strictness=2)
    rows = [{"user_input": QUESTION, "response": "It shipped."}, {"user_input": 7, "response": "x"}]
    failed, bad = (r.report.to_dict() for r in metric.batch_score(rows))
    nothing = {"judge_prompt_tokens": 0, "judge_completion_tokens": 0, "embedding_requests": 0}
    assert failed == {
        "user_input": QUESTION,
        "response": "It shipped.",
        "score": None,
        "strictness": 2,
        "probe_prompt": "diverse",
        "all_noncommittal": False,
        "probes": [],
        "judge_calls": 0,
        "duplicates_dropped": 0,
        "distinct_probes": 0,
        "probe_similarity": None,
        "notes": [],
        "error": "RuntimeError: judge down",
        "reason": "Not scored (other): an unexpected error: RuntimeError: judge down",
        "question_language": None,
        "usage": {"judge_requests": 1, **nothing, "embedding_tokens": 0, "cached": 0},
        "cause": "other",
        "score_stderr": None,
    }
    assert (bad["user_input"], bad["response"], bad["cause"]) == ("7", "x", "bad_input")
    assert bad["error"] == "TypeError: user_input must be a string, got int"
    assert bad["usage"]["judge_requests"] == 0 and bad["strictness"] == 2


# --- early stop, rows read ahead, shared requests, rate limits ----------------------------


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


def test_batch_embeddings_shares_requests_or_sends_two_per_sample() -> None:
    for shared in (True, False):
        embeddings = CountingEmbeddings()
        metric = AnswerRelevancy(llm=PretendJudge(), embeddings=embeddings, batch_embeddings=shared)
        metric.batch_score(ROWS)
        embeddings.check_requests(len(ROWS), 3, shared)


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
