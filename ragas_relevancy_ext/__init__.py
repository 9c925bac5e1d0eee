"""ragas-relevancy-ext: RAGAS answer relevancy with diverse probes and probe-level reports.
Names load on first use, so ``import ragas_relevancy_ext`` does not import RAGAS."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .adapters import OneTextPerCall, gemini_embeddings, local_embeddings
    from .error_bars import ErrorBars, PairedDifference, paired_difference, run_error_bars
    from .errors import Cause, EmbeddingCallError, EmbeddingShapeError, JudgeReplyError, cause_of
    from .legacy import ResponseRelevancy, answer_relevancy
    from .metric import AnswerRelevancy, RelevancyResult
    from .parity import compare_with_stock
    from .results import probe_frame, report_for, reports_for, usage_for
    from .run.limits import RateLimits
    from .scoring.prompts import AngleProbePrompt, DiverseProbePrompt, SequentialProbePrompt
    from .scoring.report import Probe, RelevancyReport
    from .scoring.usage import Usage
    from .store.cache import CachedJudge

__all__ = [
    "AngleProbePrompt",
    "AnswerRelevancy",
    "CachedJudge",
    "Cause",
    "DiverseProbePrompt",
    "EmbeddingCallError",
    "EmbeddingShapeError",
    "ErrorBars",
    "JudgeReplyError",
    "OneTextPerCall",
    "PairedDifference",
    "Probe",
    "RateLimits",
    "RelevancyReport",
    "RelevancyResult",
    "ResponseRelevancy",
    "SequentialProbePrompt",
    "Usage",
    "answer_relevancy",
    "cause_of",
    "compare_with_stock",
    "gemini_embeddings",
    "local_embeddings",
    "paired_difference",
    "probe_frame",
    "report_for",
    "reports_for",
    "run_error_bars",
    "usage_for",
]

# module -> the public names it defines, each loaded on first use
_MODULES: dict[str, tuple[str, ...]] = {
    "metric": ("AnswerRelevancy", "RelevancyResult"),
    "legacy": ("ResponseRelevancy", "answer_relevancy"),
    "scoring.report": ("RelevancyReport", "Probe"),
    "errors": ("Cause", "cause_of", "EmbeddingShapeError", "EmbeddingCallError", "JudgeReplyError"),
    "scoring.prompts": ("AngleProbePrompt", "DiverseProbePrompt", "SequentialProbePrompt"),
    "adapters": ("OneTextPerCall", "gemini_embeddings", "local_embeddings"),
    "parity": ("compare_with_stock",),
    "run.limits": ("RateLimits",),
    "results": ("probe_frame", "report_for", "reports_for", "usage_for"),
    "store.cache": ("CachedJudge",),
    "scoring.usage": ("Usage",),
    "error_bars": ("ErrorBars", "PairedDifference", "paired_difference", "run_error_bars"),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ragas_relevancy_ext' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
