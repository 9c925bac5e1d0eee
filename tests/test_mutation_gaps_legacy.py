"""What the legacy metric must keep inside ``ragas.evaluate``, found unchecked by mutation
testing: ``RunConfig`` settings, each row's report trace (also of a failed row), shared
embedding requests, one translation per language, and its error messages."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from common import TranslationCounter
from ragas import EvaluationDataset, evaluate
from ragas.callbacks import ChainType
from ragas.dataset_schema import SingleTurnSample
from ragas.embeddings.base import LangchainEmbeddingsWrapper
from ragas.run_config import RunConfig

from ragas_relevancy_ext import report_for
from ragas_relevancy_ext.legacy import ResponseRelevancy
from ragas_relevancy_ext.results import REPORT_TRACE
from ragas_relevancy_ext.scoring.prompts import AnswerRelevancePrompt, ResponseRelevancePrompt
from ragas_relevancy_ext.testing.offline import (
    HashEmbeddings,
    LangchainHashEmbeddings,
    PretendJudge,
)

ROWS = [
    {"user_input": f"How do refunds work for order {i}?", "response": "Refunds take five days."}
    for i in range(3)
]


def _peak(run_config: RunConfig) -> int:
    judge = PretendJudge(latency=0.002)
    evaluate(
        EvaluationDataset.from_list(ROWS),
        metrics=[ResponseRelevancy(strictness=3, probe_prompt="angles")],
        llm=judge,
        embeddings=HashEmbeddings(),
        run_config=run_config,
        show_progress=False,
    )
    assert judge.calls >= 3 * len(ROWS)
    return judge.peak


def test_max_workers_one_keeps_one_judge_call_in_flight() -> None:
    assert _peak(RunConfig(max_workers=1)) == 1


@pytest.mark.parametrize("workers", [2, 16])
def test_max_workers_bounds_the_judge_calls_of_a_row(workers: int) -> None:
    peak = _peak(RunConfig(max_workers=workers))
    assert 1 < peak <= workers


# --- what a row's report trace holds ---------------------------------------------------------


class CountingEmbeddings(HashEmbeddings):
    """HashEmbeddings that record how many texts each request carried; texts marked BROKEN
    fail the request."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[int] = []

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        self.requests.append(len(texts))
        if any("BROKEN" in text for text in texts):
            raise RuntimeError("embeddings down")
        return [self.embed_text(text) for text in texts]

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        return (await self.aembed_texts([text]))[0]


def _evaluate(metric: ResponseRelevancy, rows: list[dict[str, str]], **kwargs: Any) -> Any:
    kwargs.setdefault("llm", PretendJudge())
    kwargs.setdefault("embeddings", HashEmbeddings())
    return evaluate(
        EvaluationDataset.from_list(rows), metrics=[metric], show_progress=False, **kwargs
    )


def test_the_report_trace_holds_the_row_and_is_a_prompt_step() -> None:
    result = _evaluate(ResponseRelevancy(strictness=2), ROWS[:1])
    step = result.traces[0]["answer_relevancy"][REPORT_TRACE]
    assert step["input"] == {"user_input": ROWS[0]["user_input"], "response": ROWS[0]["response"]}
    assert step["output"] == report_for(result, 0).to_dict()
    runs = [run for run in result.ragas_traces.values() if run.name == REPORT_TRACE]
    assert len(runs) == 1
    assert runs[0].metadata == {"type": ChainType.RAGAS_PROMPT}


def test_a_failed_rows_report_keeps_the_row_the_options_and_what_it_spent() -> None:
    rows = [{"user_input": "BROKEN: where is order A17?", "response": "It shipped on Monday."}]
    metric = ResponseRelevancy(strictness=2, probe_prompt="angles")
    result = _evaluate(metric, rows, embeddings=CountingEmbeddings())
    report = report_for(result, 0)
    assert math.isnan(report.score)
    assert (report.user_input, report.response) == (rows[0]["user_input"], rows[0]["response"])
    assert (report.strictness, report.probe_prompt) == (2, "angles")
    assert report.error == "RuntimeError: embeddings down"
    assert report.usage is not None and report.usage.judge_requests == 2


@pytest.mark.parametrize("shared", [True, False])
def test_batch_embeddings_shares_requests_across_rows_or_sends_two_per_row(shared: bool) -> None:
    embeddings = CountingEmbeddings()
    metric = ResponseRelevancy(strictness=3, batch_embeddings=shared)
    _evaluate(metric, ROWS, embeddings=embeddings)
    assert sum(embeddings.requests) == (1 + 3) * len(ROWS)
    if shared:
        assert len(embeddings.requests) < 2 * len(ROWS)
    else:
        assert sorted(embeddings.requests) == [1] * len(ROWS) + [3] * len(ROWS)


def test_a_named_language_is_translated_once_per_metric() -> None:
    rows = [{**row, "user_input": f"{row['user_input']} ({i})"} for i, row in enumerate(ROWS)]
    once, many = TranslationCounter(), TranslationCounter()
    _evaluate(ResponseRelevancy(language="spanish"), rows[:1], llm=once)
    metric = ResponseRelevancy(language="spanish")
    result = _evaluate(metric, rows, llm=many)
    assert once.translations > 0
    assert many.translations == once.translations
    assert report_for(result, 0).probe_prompt == "diverse (spanish)"


def test_evaluate_hands_its_run_config_to_the_metrics_legacy_embeddings() -> None:
    embeddings = LangchainEmbeddingsWrapper(LangchainHashEmbeddings())
    run_config = RunConfig(timeout=77, max_workers=2)
    _evaluate(ResponseRelevancy(embeddings=embeddings), ROWS[:1], run_config=run_config)
    assert embeddings.run_config is run_config


def test_prompts_given_twice_must_agree() -> None:
    with pytest.raises(ValueError) as caught:
        ResponseRelevancy(question_generation=ResponseRelevancePrompt(), probe_prompt="diverse")
    assert str(caught.value) == (
        "question_generation=ResponseRelevancePrompt and probe_prompt='diverse' disagree: "
        "give the prompt once, as probe_prompt or as question_generation"
    )
    agreed = ResponseRelevancy(question_generation=ResponseRelevancePrompt(), probe_prompt="stock")
    assert agreed.probe_prompt == "stock"


def test_save_prompts_names_the_prompt_in_use_and_its_module(tmp_path: Any) -> None:
    prompt = AnswerRelevancePrompt()
    metric = ResponseRelevancy(probe_prompt=prompt)
    with pytest.raises(TypeError) as caught:
        metric.save_prompts(str(tmp_path))
    assert str(caught.value) == (
        "save_prompts needs a ragas.prompt.PydanticPrompt; the prompt in use, "
        f"AnswerRelevancePrompt, is a {type(prompt).__module__} prompt without save/load"
    )


# --- the language model of a row's report is loaded off the event loop -----------------------


def test_a_row_refused_before_scoring_loads_the_language_model_off_the_loop(model_loads) -> None:
    rows = [{"user_input": "Where is order A17?", "response": "   "}]
    result = _evaluate(ResponseRelevancy(), rows)
    report = report_for(result, 0)
    assert report.error == "ValueError: response cannot be empty"
    assert len(model_loads) == 1
    assert model_loads[0][1] is False  # no event loop was running in the loading thread


def test_an_evaluate_run_keeps_to_the_metric_rate_limits(monkeypatch: Any) -> None:
    """Every request of ``ResponseRelevancy``'s rows is paced under its ``rate_limits``."""
    from ragas_relevancy_ext.run.limits import KeyLimit, RateLimits

    seen: list[Any] = []

    async def wait(self: KeyLimit, tokens: int) -> int:
        seen.append(self)
        return self.changes

    monkeypatch.setattr(KeyLimit, "wait", wait)
    _evaluate(ResponseRelevancy(strictness=2, rate_limits=RateLimits(rpm=60)), ROWS[:2])
    judge = [limit for limit in seen if "/chat/completions" in limit.name]
    assert len(judge) >= 2 and all(limit.rpm == 60 for limit in judge)  # one a row, at least


# --- the run a row joins -----------------------------------------------------------------------


def test_max_workers_zero_bounds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # ragas reads max_workers <= 0 as "no bound"; a bound of 0 would hold every call forever
    judge = PretendJudge()
    metric = ResponseRelevancy(llm=judge, embeddings=HashEmbeddings(), strictness=2)
    metric.init(RunConfig(max_workers=0))
    score = asyncio.run(metric.single_turn_ascore(SingleTurnSample(**ROWS[0])))
    assert math.isfinite(score)


def test_a_row_in_another_event_loop_or_with_other_embeddings_starts_a_new_run() -> None:
    first, second = CountingEmbeddings(), CountingEmbeddings()
    metric = ResponseRelevancy(llm=PretendJudge(), embeddings=first, strictness=2)

    async def row(i: int) -> float:
        return await metric.single_turn_ascore(SingleTurnSample(**ROWS[i]))

    async def swapping_embeddings() -> list[float]:
        before = await row(2)
        metric.embeddings = second
        return [before, await row(0)]

    scores = [asyncio.run(row(0)), asyncio.run(row(1))]  # two event loops
    scores += asyncio.run(swapping_embeddings())  # one loop, the embeddings swapped
    assert all(math.isfinite(s) for s in scores)
    assert len(first.requests) == 6  # two requests (question, probes) a row
    assert len(second.requests) == 2
