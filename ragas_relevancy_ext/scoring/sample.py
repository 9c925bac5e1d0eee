"""One sample's path from (user_input, response) to a :class:`RelevancyReport`, the same for
every metric flavour."""

from __future__ import annotations

import math
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import EmbeddingShapeError, cause_of, failure_text, from_embeddings
from . import tracing
from .aio import DEFAULT_MAX_CONCURRENCY
from .cosines import all_noncommittal, non_finite, probe_cosines, relevancy_score
from .embeddings import embed_question_and_probes
from .languages import AUTO, AdaptedPrompts, check_language, load_in_background
from .probe_modes import ProbeMode, Prompt, collect_probes, prompt_label, resolve_probe_prompt
from .redaction import redact
from .report import Probe, RelevancyReport, not_scored_reason
from .usage import Usage, UsageMeter, metering

if TYPE_CHECKING:
    from ..run.batching import RowEmbeddings
    from .embeddings import Embeddings
    from .judges import Judge

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "ProbeOptions",
    "CheckedOptions",
    "check_inputs",
    "check_option",
    "failed_report",
    "score_sample",
]


def check_inputs(user_input: Any, response: Any) -> None:
    """TypeError for a non-string field, ValueError for an empty one (as stock)."""
    for name, value in (("user_input", user_input), ("response", response)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, got {type(value).__name__}")
        if not value.strip():
            raise ValueError(f"{name} cannot be empty")


def check_option(name: str, value: Any) -> Any:
    """``value`` checked when ``name`` is a metric option (ValueError naming it), else as given."""
    if name in ("strictness", "max_concurrency"):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    elif name == "batch_embeddings" and not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    elif name == "language":
        return check_language(value)
    elif name == "rate_limits" and value is not None and not hasattr(value, "embedding_tpm"):
        raise ValueError(f"{name} must be a RateLimits or None, got {value!r}")
    return value


class CheckedOptions:
    """Checks each metric option where it is set (see :func:`check_option`)."""

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, check_option(name, value))


@dataclass(frozen=True)
class ProbeOptions:
    """What both flavours score with, resolved from the metric's attributes at each call (so
    an attribute set on a ready instance takes effect)."""

    strictness: int
    mode: ProbeMode
    prompt: Prompt
    prompt_name: str
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    language: str = AUTO
    batch_embeddings: bool = True

    @classmethod
    def resolve(
        cls,
        strictness: Any,
        probe_prompt: Any,
        max_concurrency: Any = DEFAULT_MAX_CONCURRENCY,
        legacy: bool = False,
        language: Any = AUTO,
        batch_embeddings: Any = True,
    ) -> ProbeOptions:
        """Resolve a metric's settings (ValueError/TypeError naming a bad one)."""
        mode, prompt = resolve_probe_prompt(probe_prompt, legacy)
        name = prompt_label(mode, prompt)
        if language not in (AUTO, getattr(prompt, "language", "english")):
            name += f" ({language})"
        return cls(strictness, mode, prompt, name, max_concurrency, language, batch_embeddings)


async def score_sample(
    user_input: str,
    response: str,
    *,
    llm: Judge,
    embeddings: Embeddings,
    options: ProbeOptions,
    limiter: AbstractAsyncContextManager[Any] | None = None,
    callbacks: Any = None,
    trace_name: str | None = None,
    adapted: AdaptedPrompts | None = None,
    embedder: RowEmbeddings | None = None,
    meter: UsageMeter | None = None,
) -> RelevancyReport:
    """Probe, embed, score and report one sample; the report carries what it cost.

    ``callbacks`` (as ``ragas.evaluate`` passes them) reach the judge in a prompt step named
    ``trace_name``; ``embedder`` shares embedding requests with the run's other samples; usage
    is added to ``meter``, which the caller keeps for a sample that fails.
    """
    sample: AbstractContextManager[Any] = nullcontext()
    if tracing.tracer() is not None:
        mode, name = options.mode.name, options.prompt_name
        sample = tracing.sample_span(options.strictness, mode, name, user_input, response)
    with sample as span, metering(meter) as meter:
        check_inputs(user_input, response)
        if embedder is not None:
            embedder.expect(user_input)
        load_in_background()  # the report's languages: loaded off the loop by the time it is read
        try:
            prompt = options.prompt
            if options.language != AUTO:
                store = adapted if adapted is not None else AdaptedPrompts()
                prompt = await store.get(prompt, options.language, llm)
            probes = await collect_probes(
                llm,
                options.mode,
                prompt,
                response,
                options.strictness,
                limiter,
                callbacks,
                trace_name,
            )
        except Exception:
            if embedder is not None:
                await embedder.release()
            raise
        measured: dict[str, Any] = {"score": math.nan, "all_noncommittal": False}
        if not probes.questions and embedder is not None:
            await embedder.release()
        if probes.questions:  # else not measured; the judge's failures are in the notes
            if embedder is not None:
                vectors = await embedder.question_and_probes(user_input, probes.questions)
            else:
                vectors = await embed_question_and_probes(
                    embeddings, user_input, probes.questions, limiter
                )
            cosines, similarity = probe_cosines(*vectors)
            problem = non_finite(cosines)
            if problem is not None:
                raise EmbeddingShapeError(
                    f"{type(embeddings).__name__} returned vectors whose cosines cannot be "
                    f"computed: {problem}"
                )
            flags = probes.noncommittal
            measured = dict(
                score=relevancy_score(cosines, flags),
                all_noncommittal=all_noncommittal(flags),
                probes=[
                    Probe(q, f, c, "")  # language detected when first read
                    for q, f, c in zip(probes.questions, flags, cosines.tolist(), strict=True)
                ],
                distinct_probes=probes.distinct(),
                probe_similarity=similarity,
            )
        report = RelevancyReport(
            user_input=user_input,
            response=response,
            strictness=options.strictness,
            probe_prompt=options.prompt_name,
            judge_calls=probes.judge_calls,
            duplicates_dropped=probes.duplicates_dropped,
            notes=probes.notes,
            question_language="",  # detected when first read
            usage=meter.usage,
            **measured,
        )
        if span is not None:
            tracing.note_report(span, report)
        return report


def failed_report(
    user_input: Any,
    response: Any,
    strictness: int,
    prompt_name: str,
    exc: BaseException,
    usage: Usage | None = None,
) -> RelevancyReport:
    """The report of a sample that could not be scored: NaN, with the failure (API keys
    masked) as its reason and its cause read from the whole chain of ``exc``."""
    cause, error = cause_of(exc), redact(failure_text(exc))
    return RelevancyReport(
        user_input=user_input if isinstance(user_input, str) else repr(user_input),
        response=response if isinstance(response, str) else repr(response),
        score=math.nan,
        strictness=strictness,
        probe_prompt=prompt_name,
        all_noncommittal=False,
        error=error,
        reason=not_scored_reason(cause, error, from_embeddings(exc)),
        usage=usage,
        cause=cause,
    )
