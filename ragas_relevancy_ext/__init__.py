"""ragas-relevancy-ext: RAGAS answer relevancy with diverse probes and probe-level reports.

Change one import::

    from ragas_relevancy_ext import AnswerRelevancy   # was: ragas.metrics.collections

Names are loaded on first use, so ``import ragas_relevancy_ext`` (and the CLI's ``--help``)
does not pay for importing RAGAS.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "AnswerRelevancy": "metric",
    "RelevancyResult": "metric",
    "RelevancyReport": "report",
    "Probe": "report",
    "EmbeddingShapeError": "errors",
    "JudgeReplyError": "errors",
    "DiverseProbePrompt": "prompts",
    "SequentialProbePrompt": "prompts",
    "compare_with_stock": "parity",
    "OneTextPerCall": "adapter",
    "EmbeddingCallError": "errors",
    "gemini_embeddings": "adapter",
    "local_embeddings": "adapter",
    "ResponseRelevancy": "legacy",
    "answer_relevancy": "legacy",
    "probe_frame": "frame",
    "report_for": "frame",
    "reports_for": "frame",
    "CachedJudge": "cache",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ragas_relevancy_ext' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
