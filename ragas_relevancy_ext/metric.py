"""The drop-in modern metric: stock collections `AnswerRelevancy` with probe-level results.

Usage:
    >>> from ragas_relevancy_ext import AnswerRelevancy
    >>> metric = AnswerRelevancy(llm=llm, embeddings=embeddings, strictness=3)
    >>> result = metric.score(user_input="Where is order A17?", response="It shipped on 3 March.")
    >>> result.value, result.reason
    >>> print(result.report)          # every probe: question, noncommittal flag, cosine
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Mapping
from functools import cached_property
from typing import Any

from ragas.metrics.collections.answer_relevancy import AnswerRelevancy as StockAnswerRelevancy
from ragas.metrics.result import MetricResult

from .run.batching import RunEmbedder
from .run.limits import RateLimits, run_limits
from .run.scheduler import RowNotStarted, Scheduler
from .run.streaming import EarlyStop, bounded_map
from .scoring import tracing
from .scoring.embeddings import Embeddings
from .scoring.judges import Judge
from .scoring.languages import AUTO, AdaptedPrompts
from .scoring.probe_modes import PromptSpec, resolve_probe_prompt
from .scoring.report import RelevancyReport
from .scoring.sample import (
    DEFAULT_MAX_CONCURRENCY,
    CheckedOptions,
    ProbeOptions,
    failed_report,
    score_sample,
)
from .scoring.usage import UsageMeter

__all__ = ["AnswerRelevancy", "RelevancyResult"]


class RelevancyResult(MetricResult):
    """A ``MetricResult`` whose ``.report`` holds every probe behind ``.value``; ``.reason`` is
    the report's reason, written when first read, unless another is set."""

    def __init__(self, report: RelevancyReport):
        self.report = report
        super().__init__(value=report.score)
        del self.reason  # read from the report when first read

    @cached_property
    def reason(self) -> str | None:  # type: ignore[override]
        """Why the score is what it is (the report's reason sentence)."""
        return self.report.reason


# stock's two bases declare allowed_values differently: ragas's own disagreement
class AnswerRelevancy(CheckedOptions, StockAnswerRelevancy):  # type: ignore[misc]
    """Answer relevancy as RAGAS computes it, with concurrent judge calls and per-probe reports:
    stock collections ``AnswerRelevancy``'s constructor and calls, plus:

    probe_prompt: ``"stock"`` (RAGAS's prompt, one call per probe), ``"sequential"``,
        ``"diverse"``, ``"angles"`` or a prompt object with the same input/output models.
    max_concurrency: requests in flight at once per scoring call, earlier samples' first.
    language: ``"auto"`` (probes in the response's language) or a language's name: the prompt
        is translated by the judge once per metric and language, as ``prompt.adapt`` does.
    rate_limits: ``RateLimits`` a call keeps to; fields left None are learned from the
        provider's headers and 429s, and a 429 pauses the key, then the request is asked again.
    batch_embeddings: concurrent samples share embedding requests; False sends two per sample.

    ``prompt`` (stock's attribute) holds the prompt sent; setting it or ``probe_prompt`` makes
    the mode follow the object. Every option is checked where it is set (ValueError naming it).
    """

    def __init__(
        self,
        llm: Judge,
        embeddings: Embeddings,
        name: str = "answer_relevancy",
        strictness: int = 3,
        *,
        probe_prompt: PromptSpec = "diverse",
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        language: str = AUTO,
        batch_embeddings: bool = True,
        rate_limits: RateLimits | None = None,
        **kwargs: Any,
    ):
        self.max_concurrency = max_concurrency
        self.rate_limits = rate_limits
        self.language = language
        self.batch_embeddings = batch_embeddings
        self.adapted = AdaptedPrompts()
        # stock declares only its modern kinds; every kind of Judge and Embeddings is scored here
        super().__init__(
            llm=llm,  # type: ignore[arg-type]
            embeddings=embeddings,  # type: ignore[arg-type]
            name=name,
            strictness=strictness,
            **kwargs,
        )
        self.probe_prompt = probe_prompt

    @property
    def prompt(self) -> Any:
        """The prompt object sent to the judge."""
        return self._prompt

    @prompt.setter
    def prompt(self, value: PromptSpec) -> None:
        self._prompt = resolve_probe_prompt(value)[1]  # TypeError/ValueError when it fits no mode
        self._probe_prompt = value

    @property
    def probe_prompt(self) -> PromptSpec:
        """The prompt in use as last set: a mode's name or the prompt object (reports give its
        label, see :attr:`RelevancyReport.probe_prompt`)."""
        return self._probe_prompt

    @probe_prompt.setter
    def probe_prompt(self, value: PromptSpec) -> None:
        self.prompt = value

    @property
    def probe_mode(self) -> str:
        """The probe mode the prompt in use fits."""
        return resolve_probe_prompt(self.prompt)[0].name

    def probe_options(self) -> ProbeOptions:
        """The options a scoring call uses now, read from the instance's attributes."""
        return ProbeOptions.resolve(
            self.strictness,
            self.prompt,
            self.max_concurrency,
            language=self.language,
            batch_embeddings=self.batch_embeddings,
        )

    async def ascore(self, user_input: str, response: str) -> RelevancyResult:  # type: ignore[override]
        """Score one sample; the result's ``.report`` lists every probe."""
        async with self._scheduler() as run:
            return await self._ascore_on(run.row(), user_input, response)

    def _scheduler(self, cautious: bool = False) -> Scheduler:
        """A run's scheduler, keeping to this metric's rate limits."""
        limits = run_limits(self.rate_limits, self.llm, self.embeddings)
        return Scheduler(self.max_concurrency, cautious=cautious, limits=limits)

    async def _ascore_on(self, row: Any, user_input: str, response: str) -> RelevancyResult:
        """One sample whose calls are ``row``'s (a run's row)."""
        report = await score_sample(
            user_input,
            response,
            llm=self.llm,
            embeddings=self.embeddings,
            options=self.probe_options(),
            limiter=row,
            adapted=self.adapted,
        )
        return RelevancyResult(report)

    async def ascore_each(
        self,
        inputs: Iterable[Any] | AsyncIterable[Any],
        *,
        stop: asyncio.Event | None = None,
        early_stop: EarlyStop | None = None,
    ) -> AsyncIterator[tuple[int, RelevancyResult]]:
        """Score many samples (dicts, any iterable, sync or async, read lazily a bounded window
        at a time), yielding ``(index, result)`` as each finishes; a sample that fails gets NaN.

        Once ``stop`` is set, samples that have sent nothing are dropped and the others finish;
        closing the stream cancels what it started. ``early_stop`` sets ``stop`` once the run is
        hopeless, and until a request succeeds requests go one at a time.
        """
        options = self.probe_options()
        run = self._scheduler(cautious=early_stop is not None)
        embedder = RunEmbedder(self.embeddings, run, coalesce=self.batch_embeddings)

        def finished(result: RelevancyResult) -> RelevancyResult:
            if early_stop is not None and early_stop.note(result.report, run.gave_up):
                run.stop_new_rows()  # at once: the next row was maybe handed a slot
                if stop is not None:
                    stop.set()
            return result

        async def one(index: int, row: Any) -> RelevancyResult | None:
            meter = UsageMeter()
            calls = run.row()
            with contextlib.closing(embedder.row(calls)) as embeds:
                try:
                    user_input, response = _fields(row)
                    with tracing.row(index):  # under the span its caller gave this row, if any
                        report = await score_sample(
                            user_input,
                            response,
                            llm=self.llm,
                            embeddings=self.embeddings,
                            options=options,
                            limiter=calls,
                            adapted=self.adapted,
                            embedder=embeds,
                            meter=meter,
                        )
                except RowNotStarted:  # stopped before it asked anything: not a result
                    return None
                except Exception as exc:  # one bad sample never loses the others
                    report = failed_report(
                        *_texts_of(row), options.strictness, options.prompt_name, exc, meter.usage
                    )
                return finished(RelevancyResult(report))

        window = embedder.rows_in_flight(options.max_concurrency)
        async with run, contextlib.aclosing(bounded_map(inputs, one, window, run)) as each:
            if stop is not None:
                run.start(_stop_rows(stop, run))
            try:
                async for index, result in each:
                    if result is not None:
                        yield index, result
            finally:
                run.cancel()  # at once: nothing of the run starts while it closes

    async def abatch_score(  # type: ignore[override]
        self, inputs: list[dict[str, Any]]
    ) -> list[RelevancyResult]:
        """Score many samples concurrently, in input order; failed samples get NaN and a reason."""
        done = {index: result async for index, result in self.ascore_each(inputs)}
        return [done[index] for index in range(len(done))]

    def batch_score(self, inputs: list[dict[str, Any]]) -> list[RelevancyResult]:  # type: ignore[override]
        """Synchronous :meth:`abatch_score`."""
        return _run("batch_score", lambda: self.abatch_score(inputs))

    def score(self, user_input: str, response: str) -> RelevancyResult:  # type: ignore[override]
        """Synchronous :meth:`ascore`."""
        return _run("score", lambda: self.ascore(user_input=user_input, response=response))


def _run(name: str, start: Callable[[], Awaitable[Any]]) -> Any:
    """``asyncio.run(start())``, the result kept beside the task: ``asyncio.run`` may write its
    task's repr, and a result's repr reads its reason, whose languages load a model."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            f"Cannot call sync {name}() from an async context. Use a{name}() instead."
        )
    kept: list[Any] = []

    async def keep() -> None:
        kept.append(await start())

    asyncio.run(keep())
    return kept[0]


async def _stop_rows(stop: asyncio.Event, run: Scheduler) -> None:
    """Once ``stop`` is set, rows that have asked nothing yet are not started."""
    await stop.wait()
    run.stop_new_rows()


def _fields(row: Any) -> tuple[Any, Any]:
    """(user_input, response) of one input row; TypeError for a non-mapping or extra fields."""
    if not isinstance(row, Mapping):
        raise TypeError(f"row must be a mapping, got {type(row).__name__}")
    unexpected = sorted(str(k) for k in set(row) - {"user_input", "response"})
    if unexpected:
        raise TypeError(f"unexpected field(s) {unexpected}: rows take user_input, response")
    return row.get("user_input"), row.get("response")


def _texts_of(row: Any) -> tuple[Any, Any]:
    """What a failed report shows of a row: its fields, or the row itself when not a mapping."""
    if isinstance(row, Mapping):
        return row.get("user_input"), row.get("response")
    return "", row
