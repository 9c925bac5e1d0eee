"""Parity with stock: RAGAS's own ``AnswerRelevancy`` runs with the real judge behind a recorder,
then ours replays those replies in stock mode, so any difference in score or prompt is ours."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ragas.embeddings.base import BaseRagasEmbedding

from .errors import is_reply_error
from .run.scheduler import Row, Scheduler
from .scoring import aio
from .scoring.aio import DEFAULT_MAX_CONCURRENCY
from .scoring.embeddings import Embeddings, metered_call
from .scoring.judges import Judge, JudgeWrapper, Reply
from .scoring.report import RelevancyReport
from .scoring.usage import Usage, UsageMeter, metering

__all__ = ["ParityResult", "compare_with_stock"]


class MeteredEmbeddings(BaseRagasEmbedding):
    """Modern embeddings ``inner`` as they are (the same requests), each async call's usage
    recorded as ours is, within ``limiter``'s rate limits (a run's row) when given."""

    def __init__(self, inner: Any, limiter: Row | None = None):
        super().__init__()
        self.inner, self.limiter = inner, limiter

    async def aembed_text(self, text: str, **kwargs: Any) -> Any:
        call = lambda: metered_call(self.inner, self.inner.aembed_text(text, **kwargs))  # noqa: E731
        return await aio.send(self.limiter, "embeddings", text, call)

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> Any:
        call = lambda: metered_call(self.inner, self.inner.aembed_texts(texts, **kwargs))  # noqa: E731
        return await aio.send(self.limiter, "embeddings", texts, call)

    def embed_text(self, text: str, **kwargs: Any) -> Any:
        return self.inner.embed_text(text, **kwargs)

    def embed_texts(self, texts: list[str], **kwargs: Any) -> Any:
        return self.inner.embed_texts(texts, **kwargs)


class RecordingJudge(JudgeWrapper):
    """Passes each request to ``inner`` (within ``limiter``'s rate limits, a run's row, when
    given) and keeps the prompt and the reply."""

    def __init__(self, inner: Judge, limiter: Row | None = None):
        super().__init__(inner)
        self.limiter = limiter
        self.prompts: list[str] = []
        self.replies: list[Any] = []
        self.errors: list[Exception] = []

    async def agenerate(self, prompt: str, response_model: type[Reply]) -> Reply:
        self.prompts.append(prompt)
        ask = super().agenerate
        try:
            reply = await aio.send(
                self.limiter, "judge", prompt, lambda: ask(prompt, response_model)
            )
        except Exception as exc:
            self.errors.append(exc)
            raise
        self.replies.append(reply)
        return reply


class ReplayJudge(JudgeWrapper):
    """Gives back recorded replies in order and keeps every prompt it is sent."""

    def __init__(self, replies: list[Any]):
        super().__init__(None)  # type: ignore[arg-type]  # never asks anyone
        self.replies = list(replies)
        self.prompts: list[str] = []

    async def agenerate(self, prompt: str, response_model: type[Reply]) -> Reply:
        self.prompts.append(prompt)
        if len(self.prompts) > len(self.replies):
            raise RuntimeError(
                f"ours asked the judge {len(self.prompts)} time(s); stock's run recorded "
                f"{len(self.replies)} replies"
            )
        return response_model.model_validate(self.replies[len(self.prompts) - 1].model_dump())


@dataclass
class ParityResult:
    """Stock and ours on one sample: scores, their difference, whether prompts matched, what
    stock cost, and (``cost_report``) ours scoring it anew in ``cost_mode``."""

    stock_score: float | None
    ours_score: float
    same_prompts: bool
    report: RelevancyReport
    stock_error: str | None = None
    stock_prompts: list[str] = field(default_factory=list, repr=False)
    ours_prompts: list[str] = field(default_factory=list, repr=False)
    stock_usage: Usage | None = None
    cost_report: RelevancyReport | None = None

    @property
    def difference(self) -> float | None:
        """|stock - ours|, or None when stock failed."""
        if self.stock_score is None:
            return None
        return abs(self.stock_score - self.ours_score)


async def compare_with_stock(
    judge: Judge,
    embeddings: Embeddings,
    user_input: str,
    response: str,
    strictness: int = 3,
    cost_mode: str | None = None,
    scheduler: Scheduler | None = None,
) -> ParityResult:
    """Score one sample with stock and with ours (stock mode) on identical judge replies, and
    with ``cost_mode`` ours again in that mode; a failing judge's error is raised as it is.
    With ``scheduler`` (a run's), every request, stock's too, keeps to its rate limits."""
    from ragas.metrics.collections.answer_relevancy import AnswerRelevancy as Stock

    from .metric import AnswerRelevancy, RelevancyResult

    run = scheduler or Scheduler(DEFAULT_MAX_CONCURRENCY)
    recorder = RecordingJudge(judge, run.row())
    stock_score: float | None = None
    stock_error: str | None = None
    stock_embeddings = (
        MeteredEmbeddings(embeddings, run.row())
        if isinstance(embeddings, BaseRagasEmbedding)
        else embeddings
    )
    stock_meter = UsageMeter()
    try:
        # LangChain embeddings go to stock as they are: its own check names what it refuses
        stock = Stock(llm=recorder, embeddings=stock_embeddings, strictness=strictness)  # type: ignore[arg-type]
        with metering(stock_meter):
            value = (await stock.ascore(user_input=user_input, response=response)).value
        stock_score = float(value)
    except Exception as exc:  # stock's own failure is a finding, not a crash
        judge_failures = [e for e in recorder.errors if not is_reply_error(e)]
        if judge_failures:  # the judge itself failed (auth, network): nothing to compare
            raise judge_failures[0] from None
        stock_error = f"{type(exc).__name__}: {exc}"

    async def ours(llm: Judge, mode: str, on: Scheduler) -> RelevancyResult:
        metric = AnswerRelevancy(
            llm=llm, embeddings=embeddings, strictness=strictness, probe_prompt=mode
        )
        return await metric._ascore_on(on.row(), user_input, response)

    replay = ReplayJudge(recorder.replies)  # asks no one: only the embeddings' limit is kept
    embedding_limit = {k: v for k, v in run.limits.items() if k == "embeddings"}
    result = await ours(replay, "stock", Scheduler(run.limit, limits=embedding_limit))
    cost = await ours(judge, cost_mode, run) if cost_mode is not None else None
    cost_report = cost.report if cost is not None else None
    return ParityResult(
        stock_score=stock_score,
        ours_score=float(result.value),
        same_prompts=recorder.prompts == replay.prompts,
        report=result.report,
        stock_error=stock_error,
        stock_prompts=recorder.prompts,
        ours_prompts=replay.prompts,
        stock_usage=stock_meter.usage,
        cost_report=cost_report,
    )
