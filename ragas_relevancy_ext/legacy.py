"""The metric for ``ragas.evaluate``: RAGAS's legacy ``AnswerRelevancy`` on the shared path.

Usage:
    >>> from ragas import evaluate
    >>> from ragas_relevancy_ext import answer_relevancy, probe_frame, report_for
    >>> result = evaluate(dataset, metrics=[answer_relevancy], llm=llm, embeddings=embeddings)
    >>> probe_frame(result)           # one row per probe
    >>> print(report_for(result, 0))  # row 0: every probe, the score and why

Stock 0.4.3 in ``evaluate`` makes one probe per row with an instructor judge, needs
``embed_query`` (so modern embeddings fail) and keeps no probes. This subclass scores every row
with :func:`pipeline.score_sample`, so it makes ``strictness`` probes with any judge kind, embeds
with any embeddings kind, and leaves each row's report in the run's own traces (see
:mod:`ragas_relevancy_ext.results`).
"""

from __future__ import annotations

import asyncio
import typing as t
from dataclasses import dataclass

from ragas.callbacks import ChainType, new_group
from ragas.metrics._answer_relevance import AnswerRelevancy as StockAnswerRelevancy
from ragas.metrics.base import MetricWithEmbeddings, MetricWithLLM

from .embeddings import embeddings_kind
from .judges import judge_kind
from .pipeline import DEFAULT_MAX_CONCURRENCY, ProbeOptions, failed_report, score_sample
from .probe_modes import PromptSpec
from .report import RelevancyReport
from .results import REPORT_TRACE

if t.TYPE_CHECKING:
    from langchain_core.callbacks import Callbacks
    from ragas.dataset_schema import SingleTurnSample
    from ragas.run_config import RunConfig

__all__ = ["ResponseRelevancy", "answer_relevancy"]

_CANCELLED = "scoring was cancelled before it finished (run_config.timeout?)"


@dataclass
class ResponseRelevancy(StockAnswerRelevancy):
    """Answer relevancy for ``ragas.evaluate``: ``strictness`` probes per row, reports kept.

    An ``isinstance`` of ``ragas.metrics.AnswerRelevancy`` and ``ResponseRelevancy``; takes
    ``llm``/``embeddings`` of any kind (or those ``evaluate`` injects), plus:

    probe_prompt: ``"diverse"`` (one call for all probes), ``"sequential"``, ``"stock"`` (RAGAS's
        prompt, one call per probe) or a prompt object; read at scoring time, like
        ``strictness``, so both can be changed on a ready instance. The inherited
        ``question_generation`` prompt is not used.
    max_concurrency: judge and embedding calls in flight at once per row; ``evaluate``'s
        ``RunConfig.max_workers`` bounds the rows in flight.
    """

    strictness: int = 3
    probe_prompt: PromptSpec = "diverse"
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY

    def __post_init__(self) -> None:
        super().__post_init__()
        self._options()

    def init(self, run_config: RunConfig) -> None:
        """Check what ``evaluate`` set: a judge and embeddings of a kind the shared path speaks."""
        MetricWithLLM.init(self, run_config)
        MetricWithEmbeddings.init(self, run_config)
        judge_kind(self.llm)
        embeddings_kind(self.embeddings)
        self._options()

    async def _single_turn_ascore(self, sample: SingleTurnSample, callbacks: Callbacks) -> float:
        return await self._ascore(sample.to_dict(), callbacks)

    async def _ascore(self, row: dict[str, t.Any], callbacks: Callbacks) -> float:
        """Score one row and leave its report in ``callbacks`` (the row's metric trace).

        A row that fails still leaves a report (NaN, the failure as its reason) and then
        raises, so ``evaluate`` gives NaN or raises as ``raise_exceptions`` asks.
        """
        options = self._options()
        user_input, response = row.get("user_input"), row.get("response")
        try:
            if self.llm is None or self.embeddings is None:
                raise ValueError(f"Metric '{self.name}' needs both llm and embeddings set")
            report = await score_sample(
                user_input,  # type: ignore[arg-type]  # checked by score_sample
                response,  # type: ignore[arg-type]
                llm=self.llm,
                embeddings=self.embeddings,
                options=options,
                limiter=asyncio.Semaphore(options.max_concurrency),
                callbacks=callbacks,
            )
        except (Exception, asyncio.CancelledError) as exc:
            cause = exc if isinstance(exc, Exception) else TimeoutError(_CANCELLED)
            failed = failed_report(
                user_input, response, options.strictness, options.prompt_name, cause
            )
            _trace_report(callbacks, failed)
            raise
        _trace_report(callbacks, report)
        return report.score

    def _options(self) -> ProbeOptions:
        """Checked options from the current attributes."""
        return ProbeOptions.resolve(self.strictness, self.probe_prompt, self.max_concurrency)


def _trace_report(callbacks: Callbacks, report: RelevancyReport) -> None:
    """Record ``report`` as a step of the metric's trace, which ``evaluate`` keeps per run."""
    if callbacks is None:
        return
    run, _ = new_group(
        REPORT_TRACE,
        inputs={"data": {"user_input": report.user_input, "response": report.response}},
        callbacks=callbacks,
        metadata={"type": ChainType.RAGAS_PROMPT},
    )
    run.on_chain_end({"output": report.to_dict()})


answer_relevancy = ResponseRelevancy()
