"""ResponseRelevancy inside ragas.evaluate / aevaluate: every judge and embeddings kind,
``strictness`` probes per row, per-probe rows read back from the run's own result."""

from __future__ import annotations

import asyncio
import logging
import math
import sys
from typing import Any

import pytest
from common import CountingEmbeddings
from ragas import EvaluationDataset, aevaluate, evaluate
from ragas.callbacks import ChainType
from ragas.dataset_schema import SingleTurnSample
from ragas.embeddings.base import LangchainEmbeddingsWrapper
from ragas.llms.base import LangchainLLMWrapper
from ragas.run_config import RunConfig

from ragas_relevancy_ext import (
    AnswerRelevancy,
    ResponseRelevancy,
    answer_relevancy,
    probe_frame,
    report_for,
    reports_for,
)
from ragas_relevancy_ext.results import REPORT_TRACE
from ragas_relevancy_ext.scoring.prompts import AnswerRelevancePrompt, ResponseRelevancePrompt
from ragas_relevancy_ext.testing.offline import (
    HashEmbeddings,
    LangchainHashEmbeddings,
    PretendChatModel,
    PretendJudge,
)

TOPICS = [
    ("order A17", "Order A17 shipped on 3 March. It arrives on Friday."),
    ("the refund window", "Refunds are accepted within 30 days of delivery."),
    ("shipping to Norway", "Sorry, I don't know whether we ship there."),
    ("the warranty", "The warranty covers parts and labour for two years."),
    ("store hours", "The store opens at nine and closes at six."),
    ("gift cards", "Gift cards never expire and work online."),
    ("the loyalty scheme", "I am unsure how points are counted."),
]
QUESTIONS = ["What about {}?", "Tell me about {}.", "Can you explain {}?", "Any news on {}?"]


def make_rows(n: int, tag: str = "") -> list[dict[str, str]]:
    """``n`` deterministic rows; ``tag`` keeps two datasets apart."""
    rows = []
    for i in range(n):
        topic, response = TOPICS[i % len(TOPICS)]
        question = QUESTIONS[(i // len(TOPICS)) % len(QUESTIONS)].format(topic)
        rows.append({"user_input": f"{tag}{question} (#{i})", "response": response})
    return rows


def run(metric: Any, rows: list[dict[str, str]], **kwargs: Any) -> Any:
    return evaluate(
        EvaluationDataset.from_list(rows), metrics=[metric], show_progress=False, **kwargs
    )


def modern_scores(rows: list[dict[str, str]], probe_prompt: str = "diverse") -> list[float]:
    """What the modern metric gives with PretendJudge and HashEmbeddings on the same rows."""
    metric = AnswerRelevancy(
        llm=PretendJudge(), embeddings=HashEmbeddings(), strictness=3, probe_prompt=probe_prompt
    )
    return [r.value for r in metric.batch_score(rows)]


def scores(result: Any) -> list[float]:
    return list(result["answer_relevancy"])


# --- what it is -----------------------------------------------------------------------------


def test_is_a_legacy_answer_relevancy_and_ready_instance_mirrors_stock() -> None:
    import ragas.metrics as stock

    metric = ResponseRelevancy()
    for cls in (stock.AnswerRelevancy, stock.ResponseRelevancy):
        assert isinstance(metric, cls) and isinstance(answer_relevancy, cls)
    assert answer_relevancy.name == stock.answer_relevancy.name == "answer_relevancy"
    assert answer_relevancy.llm is None and answer_relevancy.embeddings is None
    assert (metric.strictness, metric.probe_prompt, metric.max_concurrency) == (3, "diverse", 16)


@pytest.mark.parametrize(
    "options",
    [{"strictness": 0}, {"strictness": True}, {"max_concurrency": 0}, {"probe_prompt": "fast"}],
)
def test_bad_options_fail_at_construction(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ResponseRelevancy(**options)


def test_evaluate_rejects_an_unknown_judge_before_scoring() -> None:
    with pytest.raises(TypeError, match="llm must be"):
        run(ResponseRelevancy(), make_rows(2), llm=object(), embeddings=HashEmbeddings())


# --- scores match the modern metric ---------------------------------------------------------


def test_fifty_rows_match_the_modern_metric_row_by_row() -> None:
    rows = make_rows(50)
    judge = PretendJudge()
    result = run(answer_relevancy, rows, llm=judge, embeddings=HashEmbeddings())

    assert scores(result) == pytest.approx(modern_scores(rows), abs=1e-12)
    assert judge.calls == 50  # diverse: one call per row for all three probes
    assert answer_relevancy.llm is None  # evaluate put back what it injected
    frame = probe_frame(result)
    assert list(frame.columns) == [
        "user_input",
        "response",
        "question",
        "noncommittal",
        "cosine",
        "score",
    ]
    assert frame.index.name == "row" and len(frame) == 150
    assert frame.groupby(level="row").size().eq(3).all()
    assert frame.groupby(level="row")["user_input"].first().tolist() == [
        r["user_input"] for r in rows
    ]
    for i in (0, 17, 49):
        report = report_for(result, i)
        assert report.user_input == rows[i]["user_input"] and len(report.probes) == 3
        assert report.score == pytest.approx(scores(result)[i], abs=1e-12)


def test_aevaluate_matches_the_modern_metric() -> None:
    rows = make_rows(12)

    async def main() -> Any:
        return await aevaluate(
            EvaluationDataset.from_list(rows),
            metrics=[ResponseRelevancy()],
            llm=PretendJudge(),
            embeddings=HashEmbeddings(),
            show_progress=False,
        )

    result = asyncio.run(main())
    assert scores(result) == pytest.approx(modern_scores(rows), abs=1e-12)
    assert all(len(r.probes) == 3 for r in reports_for(result))


# --- every judge kind -------------------------------------------------------------------------


JUDGE_KINDS = ["instructor", "ragas-llm", "langchain-via-evaluate", "langchain-on-metric"]


def _judge(kind: str) -> Any:
    if kind == "instructor":
        return PretendJudge()
    if kind == "ragas-llm":
        return LangchainLLMWrapper(PretendChatModel())
    return PretendChatModel()  # evaluate wraps it, or the metric speaks to it directly


def _prompts_sent(judge: Any) -> int:
    inner = getattr(judge, "langchain_llm", judge)
    return inner.calls if isinstance(inner, PretendJudge) else len(inner.prompts)


@pytest.mark.parametrize("probe_prompt", ["stock", "diverse", "angles"])
@pytest.mark.parametrize("kind", JUDGE_KINDS)
def test_every_judge_kind_makes_strictness_probes(kind: str, probe_prompt: str) -> None:
    rows = make_rows(10)
    judge = _judge(kind)
    if kind == "langchain-on-metric":
        metric = ResponseRelevancy(llm=judge, probe_prompt=probe_prompt)
        result = run(metric, rows, embeddings=HashEmbeddings())
    else:
        metric = ResponseRelevancy(probe_prompt=probe_prompt)
        result = run(metric, rows, llm=judge, embeddings=HashEmbeddings())

    assert scores(result) == pytest.approx(modern_scores(rows, probe_prompt), abs=1e-12)
    assert all(len(r.probes) == 3 for r in reports_for(result))
    assert _prompts_sent(judge) == len(rows) * (1 if probe_prompt == "diverse" else 3)


# --- every embeddings kind ------------------------------------------------------------------


def _embeddings(kind: str) -> Any:
    if kind == "modern":
        return HashEmbeddings()
    if kind == "legacy-wrapper":
        return LangchainEmbeddingsWrapper(LangchainHashEmbeddings())
    if kind in ("langchain-via-evaluate", "langchain-on-metric"):
        return LangchainHashEmbeddings()
    from ragas_relevancy_ext.adapters import OneTextPerCall

    return OneTextPerCall(HashEmbeddings())


@pytest.mark.parametrize(
    "kind",
    ["modern", "legacy-wrapper", "langchain-via-evaluate", "langchain-on-metric", "one-per-call"],
)
def test_every_embeddings_kind_gives_the_same_scores(kind: str) -> None:
    rows = make_rows(10)
    embeddings = _embeddings(kind)
    if kind == "langchain-on-metric":
        result = run(ResponseRelevancy(embeddings=embeddings), rows, llm=PretendJudge())
    else:
        result = run(ResponseRelevancy(), rows, llm=PretendJudge(), embeddings=embeddings)
    assert scores(result) == pytest.approx(modern_scores(rows), abs=1e-12)


# --- failing rows ---------------------------------------------------------------------------


class OutageJudge(PretendJudge):
    """PretendJudge that cannot be reached for responses mentioning an outage."""

    def _reply(self, prompt: str, response_model: Any) -> Any:
        if "OUTAGE" in prompt:
            raise ConnectionError("judge unreachable")
        return super()._reply(prompt, response_model)


class BrokenEmbeddings(HashEmbeddings):
    """HashEmbeddings that answer NaN for questions marked BROKEN."""

    def embed_text(self, text: str, **kwargs: Any) -> list[float]:
        vector = super().embed_text(text)
        return [math.nan] * len(vector) if "BROKEN" in text else vector


def _rows_with_failures() -> list[dict[str, str]]:
    rows = make_rows(8)
    rows[2] = {**rows[2], "response": "OUTAGE notice. Try later."}
    rows[5] = {**rows[5], "user_input": "BROKEN " + rows[5]["user_input"]}
    return rows


def test_failing_rows_get_nan_and_say_why_others_score() -> None:
    rows = _rows_with_failures()
    result = run(ResponseRelevancy(), rows, llm=OutageJudge(), embeddings=BrokenEmbeddings())

    got, want = scores(result), modern_scores(rows)
    assert math.isnan(got[2]) and math.isnan(got[5])
    ok = [i for i in range(len(rows)) if i not in (2, 5)]
    assert [got[i] for i in ok] == pytest.approx([want[i] for i in ok], abs=1e-12)
    unreachable = "the judge could not be reached: ConnectionError: judge unreachable"
    assert report_for(result, 2).reason == f"Not scored (unreachable): {unreachable}"
    shape = "Not scored (embeddings_error): the embeddings failed: EmbeddingShapeError:"
    assert report_for(result, 5).reason.startswith(shape)
    assert "NaN" in report_for(result, 5).reason
    assert sorted(set(probe_frame(result).index)) == ok  # failed rows have no probes


def test_failing_rows_raise_when_asked() -> None:
    with pytest.raises(ConnectionError):
        run(
            ResponseRelevancy(),
            _rows_with_failures(),
            llm=OutageJudge(),
            embeddings=HashEmbeddings(),
            raise_exceptions=True,
        )


class ClockOnDemand(asyncio.SelectorEventLoop):
    """An event loop whose clock moves ahead when the test says: a timeout fires at that point,
    never because the machine was slow."""

    def __init__(self) -> None:
        super().__init__()
        self.ahead = 0.0

    def time(self) -> float:
        return super().time() + self.ahead


class NeverAnswers(PretendJudge):
    """A judge that takes every request and never answers; once all ``rows`` have asked, it
    moves the loop's clock past every timeout."""

    def __init__(self, rows: int) -> None:
        super().__init__()
        self.rows, self.asked = rows, 0

    async def agenerate(self, prompt: str, response_model: Any) -> Any:
        self.asked += 1
        if self.asked == self.rows:
            asyncio.get_running_loop().ahead += 3600.0
        await asyncio.Event().wait()


def test_a_timed_out_row_is_reported() -> None:
    judge = NeverAnswers(rows=2)
    loop = ClockOnDemand()
    try:
        result = loop.run_until_complete(
            aevaluate(
                EvaluationDataset.from_list(make_rows(2)),
                metrics=[ResponseRelevancy()],
                llm=judge,
                embeddings=HashEmbeddings(),
                # longer than the test may run: only the clock moved by the judge reaches it
                run_config=RunConfig(timeout=600, max_retries=0),
                show_progress=False,
            )
        )
    finally:
        loop.close()
    assert judge.asked == 2
    assert all(math.isnan(s) for s in scores(result))
    for row in (0, 1):
        assert report_for(result, row).reason.startswith("Not scored (timeout): ")
        assert "TimeoutError: scoring was cancelled" in report_for(result, row).reason


# --- reports travel with their own run ------------------------------------------------------


def test_two_runs_in_one_process_never_mix() -> None:
    first, second = make_rows(6, tag="A: "), make_rows(9, tag="B: ")
    metric = ResponseRelevancy(llm=PretendJudge(latency=0.001), embeddings=HashEmbeddings())

    async def both() -> list[Any]:
        return await asyncio.gather(
            aevaluate(EvaluationDataset.from_list(first), metrics=[metric], show_progress=False),
            aevaluate(EvaluationDataset.from_list(second), metrics=[metric], show_progress=False),
        )

    for result, rows in zip(asyncio.run(both()), (first, second), strict=True):
        assert [r.user_input for r in reports_for(result)] == [r["user_input"] for r in rows]
    metric.strictness = 2  # options are read per run
    again = run(metric, first)
    assert [len(r.probes) for r in reports_for(again)] == [2] * len(first)


def test_a_result_without_our_metric_says_so() -> None:
    import ragas.metrics as stock

    stock_metric = stock.AnswerRelevancy(
        llm=PretendJudge(), embeddings=LangchainEmbeddingsWrapper(LangchainHashEmbeddings())
    )
    result = run(stock_metric, make_rows(2))
    with pytest.raises(LookupError, match="no relevancy reports"):
        report_for(result, 0)


def test_probe_frame_without_pandas_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    result = run(ResponseRelevancy(), make_rows(1), llm=PretendJudge(), embeddings=HashEmbeddings())
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        probe_frame(result)


class GarblingChatModel(PretendChatModel):
    """PretendChatModel whose replies about responses marked GARBLED cannot be read."""

    def _reply_text(self, prompt: str) -> str:
        return "not json at all" if "GARBLED" in prompt else super()._reply_text(prompt)


def _row_records(caplog: pytest.LogCaptureFixture, metric: Any, judge: Any) -> list[Any]:
    """WARNING and above logged by an ``evaluate`` run of three rows whose second fails."""
    rows = make_rows(3)
    rows[1] = {**rows[1], "response": "OUTAGE notice. GARBLED. Try later."}
    embeddings = LangchainEmbeddingsWrapper(LangchainHashEmbeddings())
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        result = run(metric, rows, llm=judge, embeddings=embeddings)
    assert [math.isnan(s) for s in scores(result)] == [False, True, False]
    return [r for r in caplog.records if "Job[1]" in r.getMessage() or "relevancy" in r.name]


@pytest.mark.parametrize("failure", ["judge unreachable", "replies unreadable"])
def test_a_failed_row_is_logged_as_stock_logs_it(caplog, failure) -> None:
    """A row that fails inside evaluate gets RAGAS's record, at stock's level and on its
    logger, naming the cause; a row stock fails on an unreadable reply fails here too."""
    import ragas.metrics as stock

    def judge() -> Any:
        if failure == "judge unreachable":
            return OutageJudge()
        return LangchainLLMWrapper(GarblingChatModel())

    theirs = _row_records(caplog, stock.AnswerRelevancy(strictness=3), judge())
    ours = _row_records(caplog, ResponseRelevancy(strictness=3), judge())
    assert [(r.name, r.levelno) for r in ours] == [(r.name, r.levelno) for r in theirs]
    assert [(r.name, r.levelname) for r in ours] == [("ragas.executor", "ERROR")]
    said = {
        "judge unreachable": "ConnectionError(judge unreachable)",
        "replies unreadable": "JudgeReplyError(the judge wrote no usable probe question in 3 "
        "judge calls)",  # the diverse prompt's, and twice again for the probes missing
    }[failure]
    assert ours[0].getMessage() == f"Exception raised in Job[1]: {said}"


# --- why: stock in evaluate -----------------------------------------------------------------


def test_stock_makes_one_probe_with_an_instructor_judge_ours_makes_strictness() -> None:
    import ragas.metrics as stock

    rows = make_rows(5)
    legacy_embeddings = LangchainEmbeddingsWrapper(LangchainHashEmbeddings())
    stock_judge, our_judge = PretendJudge(), PretendJudge()

    run(stock.AnswerRelevancy(strictness=3), rows, llm=stock_judge, embeddings=legacy_embeddings)
    ours = run(
        ResponseRelevancy(strictness=3, probe_prompt="stock"),
        rows,
        llm=our_judge,
        embeddings=legacy_embeddings,
    )

    assert stock_judge.calls == len(rows)  # one probe per row: strictness ignored
    assert our_judge.calls == 3 * len(rows)
    assert [len(r.probes) for r in reports_for(ours)] == [3] * len(rows)
    # and stock cannot use modern embeddings at all
    failed = run(stock.AnswerRelevancy(), rows, llm=PretendJudge(), embeddings=HashEmbeddings())
    assert all(math.isnan(s) for s in scores(failed))


# --- the row's callbacks reach the judge; a metric without embeddings says so ------------------


def test_every_judge_call_reaches_the_runs_callbacks() -> None:
    from langchain_core.callbacks import BaseCallbackHandler

    class CountChatCalls(BaseCallbackHandler):
        def __init__(self) -> None:
            self.prompts: list[str] = []

        def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
            self.prompts.extend(str(m[0].content) for m in messages)

    counter = CountChatCalls()
    rows = make_rows(2)
    result = run(
        ResponseRelevancy(strictness=3, probe_prompt="stock"),
        rows,
        llm=PretendChatModel(),
        embeddings=HashEmbeddings(),
        callbacks=[counter],
    )
    assert not any(math.isnan(s) for s in scores(result))
    assert len(counter.prompts) == 6  # 3 probes for each of 2 rows, each seen by the handler
    assert sum(rows[0]["response"] in p for p in counter.prompts) == 3


def test_a_metric_without_embeddings_names_what_is_missing() -> None:
    metric = ResponseRelevancy(llm=PretendJudge())
    row = {"user_input": "Where is order A17?", "response": "It shipped."}
    with pytest.raises(ValueError, match="needs both llm and embeddings"):
        asyncio.run(metric._ascore(row, None))


# --- RunConfig, report traces, shared requests and the run a row joins --------------------


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


def test_max_workers_zero_bounds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # ragas reads max_workers <= 0 as "no bound"; a bound of 0 would hold every call forever
    judge = PretendJudge()
    metric = ResponseRelevancy(llm=judge, embeddings=HashEmbeddings(), strictness=2)
    metric.init(RunConfig(max_workers=0))
    score = asyncio.run(metric.single_turn_ascore(SingleTurnSample(**ROWS[0])))
    assert math.isfinite(score)


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
    embeddings.check_requests(len(ROWS), 3, shared)


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
