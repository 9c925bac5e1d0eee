"""One sample's path from (user_input, response) to a :class:`RelevancyReport`.

Every metric flavour calls :func:`score_sample`; they differ only in how RAGAS calls them and
how the result leaves.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from ragas.prompt.metrics.base_prompt import BasePrompt

from .embedding import embed_question_and_probes
from .probing import collect_probes
from .prompts import ProbeMode, PromptSpec
from .redaction import redact
from .report import Probe, RelevancyReport
from .scoring import (
    all_noncommittal,
    cosine_similarities,
    mean_pairwise_cosine,
    normalise_question,
    relevancy_score,
)

# Judge and embedding calls in flight at once, per scoring call.
DEFAULT_MAX_CONCURRENCY = 16


def check_inputs(user_input: Any, response: Any) -> None:
    """TypeError for a non-string field, ValueError for an empty one (as stock)."""
    for name, value in (("user_input", user_input), ("response", response)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, got {type(value).__name__}")
        if not value.strip():
            raise ValueError(f"{name} cannot be empty")


def check_strictness(strictness: Any) -> int:
    """Strictness is the number of probes: a whole number from 1 up."""
    if isinstance(strictness, bool) or not isinstance(strictness, int) or strictness < 1:
        raise ValueError(f"strictness must be a whole number >= 1, got {strictness!r}")
    return strictness


def check_max_concurrency(limit: Any) -> int:
    """Calls in flight at once: a whole number from 1 up."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"max_concurrency must be a whole number >= 1, got {limit!r}")
    return limit


def prompt_label(spec: PromptSpec) -> str:
    """The name a report shows for a probe prompt: its name, or its class name."""
    return spec if isinstance(spec, str) else type(spec).__name__


async def score_sample(
    user_input: str,
    response: str,
    *,
    llm: Any,
    embeddings: Any,
    strictness: int,
    mode: ProbeMode,
    prompt: BasePrompt,
    prompt_name: str,
    limiter: asyncio.Semaphore | None = None,
    callbacks: Any = None,
) -> RelevancyReport:
    """Probe, embed, score and report one sample.

    ``callbacks`` (LangChain callbacks, as ``ragas.evaluate`` passes them) reach the judge, so
    token and cost tracking see every judge call.
    """
    check_inputs(user_input, response)
    probes = await collect_probes(llm, mode, prompt, response, strictness, limiter, callbacks)
    common = dict(
        user_input=user_input,
        response=response,
        strictness=strictness,
        probe_prompt=prompt_name,
        judge_calls=probes.judge_calls,
        duplicates_dropped=probes.duplicates_dropped,
        notes=probes.notes,
    )
    if not probes.questions:
        return RelevancyReport(score=0.0, all_noncommittal=False, **common)

    question_vector, probe_vectors = await embed_question_and_probes(
        embeddings, user_input, probes.questions, limiter
    )
    cosines = cosine_similarities(question_vector, probe_vectors)
    return RelevancyReport(
        score=relevancy_score(cosines, probes.noncommittal),
        all_noncommittal=all_noncommittal(probes.noncommittal),
        probes=[
            Probe(q, f, float(c))
            for q, f, c in zip(probes.questions, probes.noncommittal, cosines, strict=True)
        ],
        distinct_probes=len({normalise_question(q) for q in probes.questions}),
        probe_diversity=mean_pairwise_cosine(probe_vectors),
        **common,
    )


def failed_report(
    user_input: Any, response: Any, strictness: int, prompt_name: str, exc: BaseException
) -> RelevancyReport:
    """The report of a sample that could not be scored: NaN, with the failure as its reason.

    An API key from the environment that the failure quotes (a server echoing it) is masked.
    """
    return RelevancyReport(
        user_input=user_input if isinstance(user_input, str) else repr(user_input),
        response=response if isinstance(response, str) else repr(response),
        score=math.nan,
        strictness=strictness,
        probe_prompt=prompt_name,
        all_noncommittal=False,
        error=redact(f"{type(exc).__name__}: {exc}"),
    )
