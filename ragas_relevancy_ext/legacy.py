"""The metric for ``ragas.evaluate``: RAGAS's legacy ``AnswerRelevancy`` on the shared path.

Usage:
    >>> from ragas import evaluate
    >>> from ragas_relevancy_ext import answer_relevancy, probe_frame, report_for
    >>> result = evaluate(dataset, metrics=[answer_relevancy], llm=llm, embeddings=embeddings)
    >>> probe_frame(result)           # one row per probe
    >>> print(report_for(result, 0))  # row 0: every probe, the score and why

Stock 0.4.3 in ``evaluate`` makes one probe per row with an instructor judge, fails on modern
embeddings and keeps no probes; this subclass scores rows on the shared path (``strictness``
probes, any judge and embeddings kind) and leaves each row's report in the run's traces.
"""

from __future__ import annotations

import asyncio
import math
import typing as t
from dataclasses import dataclass, field

from ragas.callbacks import ChainType, new_group
from ragas.metrics._answer_relevance import AnswerRelevancy as StockAnswerRelevancy
from ragas.metrics.base import MetricWithEmbeddings, MetricWithLLM

from .errors import Cause, JudgeReplyError, cause_phrase
from .results import REPORT_TRACE
from .run.batching import RunEmbedder
from .run.limits import RateLimits, run_limits
from .run.scheduler import Scheduler
from .scoring.embeddings import embeddings_kind
from .scoring.judges import judge_kind
from .scoring.languages import AUTO, AdaptedPrompts, detector_ready
from .scoring.probe_modes import PromptSpec, prompt_label, resolve_probe_prompt
from .scoring.report import RelevancyReport, plural
from .scoring.sample import (
    DEFAULT_MAX_CONCURRENCY,
    CheckedOptions,
    ProbeOptions,
    failed_report,
    score_sample,
)
from .scoring.usage import UsageMeter

if t.TYPE_CHECKING:
    from langchain_core.callbacks import Callbacks
    from ragas.dataset_schema import SingleTurnSample
    from ragas.prompt import PydanticPrompt
    from ragas.run_config import RunConfig

__all__ = ["PROMPT_NAME", "ResponseRelevancy", "answer_relevancy"]

_CANCELLED = "scoring was cancelled before it finished (run_config.timeout?)"

# Stock's name for its prompt: the key of get_prompts() and the prompt step in traces, whatever
# prompt is in use, so code and trace readers written for stock find ours there.
PROMPT_NAME = "response_relevance_prompt"


class _CurrentRun:
    """The scheduler and embedder of the ``evaluate`` run under way, shared by its rows; a row
    in another event loop, or with other settings or embeddings, starts a new run."""

    def __init__(self, max_workers: int | None = None) -> None:
        self.max_workers = max_workers
        self.settings: tuple[t.Any, ...] = ()

    def row(
        self, llm: t.Any, embeddings: t.Any, options: ProbeOptions, rates: RateLimits | None
    ) -> t.Any:
        """(the row's calls, its embeddings) for the next row of the run: at most
        ``max_workers`` (-1: no bound) calls in flight, capped by ``max_concurrency``."""
        limit, batch = options.max_concurrency, options.batch_embeddings
        if self.max_workers is not None and self.max_workers > 0:
            limit = min(self.max_workers, limit)
        # the embedder holds the embeddings, so their id stays theirs while it is compared
        settings = (asyncio.get_running_loop(), limit, id(embeddings), batch, rates or RateLimits())
        if settings != self.settings:
            self.settings = settings
            self.scheduler = Scheduler(limit, limits=run_limits(rates, llm, embeddings))
            self.embedder = RunEmbedder(embeddings, self.scheduler, coalesce=batch)
        calls = self.scheduler.row()
        return calls, self.embedder.row(calls)

    def __reduce__(self) -> tuple[type[_CurrentRun], tuple[int | None]]:
        return (_CurrentRun, (self.max_workers,))


@dataclass
class ResponseRelevancy(CheckedOptions, StockAnswerRelevancy):
    """Answer relevancy for ``ragas.evaluate``: ``strictness`` probes per row, reports kept.

    Options as in :class:`~ragas_relevancy_ext.AnswerRelevancy`, over a whole run;
    ``max_concurrency`` caps the calls in flight across its rows, on top of
    ``RunConfig.max_workers``. ``question_generation`` (stock's attribute) holds the prompt sent,
    which RAGAS's prompt tools see as ``response_relevance_prompt``.
    """

    question_generation: t.Any = None
    strictness: int = 3
    probe_prompt: t.Any = None
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    language: str = AUTO
    batch_embeddings: bool = True
    rate_limits: RateLimits | None = None
    _adapted: AdaptedPrompts = field(
        default_factory=AdaptedPrompts, init=False, repr=False, compare=False
    )
    _run: _CurrentRun = field(default_factory=_CurrentRun, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.question_generation is None:
            self._use_prompt("diverse")
        self._ready = True

    def __setattr__(self, name: str, value: t.Any) -> None:
        if name in ("question_generation", "probe_prompt"):  # __init__'s arguments too
            self._use_prompt(value)
        else:
            super().__setattr__(name, value)

    def init(self, run_config: RunConfig) -> None:
        """Check what ``evaluate`` set: a judge and embeddings of a kind the shared path speaks."""
        MetricWithLLM.init(self, run_config)
        MetricWithEmbeddings.init(self, run_config)
        judge_kind(self.llm)
        embeddings_kind(self.embeddings)
        self._run = _CurrentRun(run_config.max_workers)  # a scheduler for each evaluate run

    def _use_prompt(self, value: PromptSpec | None) -> None:
        """Make ``value`` (None: nothing given) the prompt sent; at construction both prompt
        arguments may be given only when they agree (as ``dataclasses.replace`` passes them)."""
        if value is None:
            return
        held = self.__dict__.get("question_generation")
        if self.__dict__.get("_ready") or held is None:
            held = resolve_probe_prompt(value, legacy=True)[1]
        elif value is not held and value != prompt_label(*resolve_probe_prompt(held, True)):
            raise ValueError(
                f"question_generation={type(held).__name__} and probe_prompt={value!r} disagree: "
                "give the prompt once, as probe_prompt or as question_generation"
            )
        self.__dict__.update(question_generation=held, probe_prompt=value)

    def _get_prompts(self) -> dict[str, PydanticPrompt]:
        return {"question_generation": self.question_generation}

    def get_prompts(self) -> dict[str, PydanticPrompt]:
        """The prompt sent, under stock's name ``response_relevance_prompt``."""
        return {PROMPT_NAME: self.question_generation}

    def set_prompts(self, **prompts: t.Any) -> None:
        """Replace the prompt sent: ``set_prompts(response_relevance_prompt=prompt)``."""
        for key in prompts:
            if key != PROMPT_NAME:
                raise ValueError(
                    f"Prompt with name '{key}' does not exist. Use get_prompts() to see "
                    f"available prompts: ['{PROMPT_NAME}']"
                )
        for value in prompts.values():
            self.question_generation = value

    def save_prompts(self, path: str) -> None:
        """Save the prompt sent as RAGAS does (``{name}_response_relevance_prompt_{lang}.json``)."""
        self._savable("save_prompts")
        super().save_prompts(path)

    def load_prompts(self, path: str, language: str | None = None) -> dict[str, PydanticPrompt]:
        """Load prompts saved by :meth:`save_prompts`; pass them to :meth:`set_prompts`."""
        self._savable("load_prompts")
        return super().load_prompts(path, language)

    def _savable(self, action: str) -> None:
        from ragas.prompt import PydanticPrompt

        prompt = self.question_generation
        if not isinstance(prompt, PydanticPrompt):
            raise TypeError(
                f"{action} needs a ragas.prompt.PydanticPrompt; the prompt in use, "
                f"{type(prompt).__name__}, is a {type(prompt).__module__} prompt without save/load"
            )

    async def _single_turn_ascore(self, sample: SingleTurnSample, callbacks: Callbacks) -> float:
        return await self._ascore(sample.to_dict(), callbacks)

    async def _ascore(self, row: dict[str, t.Any], callbacks: Callbacks) -> float:
        """Score one row and leave its report in ``callbacks`` (the row's metric trace); a row
        that fails leaves a NaN report, then raises for ``evaluate``'s ``raise_exceptions``."""
        options = self._options()
        user_input, response = row.get("user_input"), row.get("response")
        meter = UsageMeter()
        calls, embeds = self._run.row(self.llm, self.embeddings, options, self.rate_limits)
        try:
            if self.llm is None or self.embeddings is None:
                raise ValueError(f"Metric '{self.name}' needs both llm and embeddings set")
            report = await score_sample(
                user_input,  # type: ignore[arg-type]  # checked by score_sample
                response,  # type: ignore[arg-type]
                llm=self.llm,
                embeddings=self.embeddings,
                options=options,
                limiter=calls,
                callbacks=callbacks,
                trace_name=PROMPT_NAME,
                adapted=self._adapted,
                embedder=embeds,
                meter=meter,
            )
        except (Exception, asyncio.CancelledError) as exc:
            cause = exc if isinstance(exc, Exception) else TimeoutError(_CANCELLED)
            failed = failed_report(
                user_input, response, options.strictness, options.prompt_name, cause, meter.usage
            )
            await _trace_report(callbacks, failed, cancelled=not isinstance(exc, Exception))
            raise
        finally:
            embeds.close()
        await _trace_report(callbacks, report)
        if not math.isfinite(report.score):  # a row stock fails: RAGAS logs it (ragas.executor)
            calls = plural(report.judge_calls, "judge call")
            raise JudgeReplyError(f"{cause_phrase(report.cause or Cause.OTHER)} in {calls}")
        return report.score

    def _options(self) -> ProbeOptions:
        """Checked options from the current attributes."""
        return ProbeOptions.resolve(
            self.strictness,
            self.question_generation,
            self.max_concurrency,
            legacy=True,
            language=self.language,
            batch_embeddings=self.batch_embeddings,
        )


async def _trace_report(
    callbacks: Callbacks, report: RelevancyReport, cancelled: bool = False
) -> None:
    """Record ``report`` as a step of the metric's trace, which ``evaluate`` keeps per run,
    once its languages' model has loaded off the loop (not for a cancelled sample)."""
    if callbacks is None:
        return
    if not cancelled:
        await detector_ready()
    run, _ = new_group(
        REPORT_TRACE,
        inputs={"data": {"user_input": report.user_input, "response": report.response}},
        callbacks=callbacks,
        metadata={"type": ChainType.RAGAS_PROMPT},
    )
    run.on_chain_end({"output": report.to_dict()})


answer_relevancy = ResponseRelevancy()
