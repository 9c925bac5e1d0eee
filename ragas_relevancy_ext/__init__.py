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

# public name -> module that defines it, loaded on first use
_EXPORTS: dict[str, str] = {
    "AnswerRelevancy": "metric",
    "RelevancyResult": "metric",
    "ResponseRelevancy": "legacy",
    "answer_relevancy": "legacy",
    "RelevancyReport": "scoring.report",
    "Probe": "scoring.report",
    "Cause": "errors",
    "cause_of": "errors",
    "EmbeddingShapeError": "errors",
    "EmbeddingCallError": "errors",
    "JudgeReplyError": "errors",
    "AngleProbePrompt": "scoring.prompts",
    "DiverseProbePrompt": "scoring.prompts",
    "SequentialProbePrompt": "scoring.prompts",
    "OneTextPerCall": "adapters",
    "gemini_embeddings": "adapters",
    "local_embeddings": "adapters",
    "compare_with_stock": "parity",
    "probe_frame": "results",
    "report_for": "results",
    "reports_for": "results",
    "usage_for": "results",
    "CachedJudge": "store.cache",
    "Usage": "scoring.usage",
    "ErrorBars": "error_bars",
    "PairedDifference": "error_bars",
    "paired_difference": "error_bars",
    "run_error_bars": "error_bars",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ragas_relevancy_ext' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
