"""Gemini as judge and embeddings, with each text embedded in its own call.

gemini-embedding-2 answers a list of texts with ONE vector, so stock answer relevancy fails in
numpy; ``gemini_embeddings`` wraps RAGAS's GoogleEmbeddings in ``OneTextPerCall``. Needs a key:

    GEMINI_API_KEY=... python examples/gemini_adapter.py

The judge goes through Gemini's OpenAI-compatible endpoint, as ``--judge gemini:MODEL`` does.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any

from ragas_relevancy_ext.cli.errors import exit_code  # the command line's rule; no RAGAS

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

JUDGE_MODEL = "gemini-2.5-flash"
EMBEDDING_MODEL = "gemini-embedding-2"
GEMINI_OPENAI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta/openai/"


def api_key() -> str:
    """The key from GEMINI_API_KEY or GOOGLE_API_KEY; exit 2 with a sentence without one."""
    key = os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
    if not key:
        print("gemini_adapter.py needs a Gemini API key: set GEMINI_API_KEY", file=sys.stderr)
        raise SystemExit(2)
    return key


SAMPLES = [
    {
        "user_input": "How do I authenticate requests to the REST API?",
        "response": "Every request needs an API key in the Authorization header as "
        "'Bearer <key>'. Create keys under Settings > API keys.",
    },
    {
        "user_input": "What does error code E42 mean on the dishwasher?",
        "response": "I'm unable to find that in the documentation, sorry.",
    },
]


def score_and_print(metric: Any, samples: list[dict[str, str]]) -> int:
    """Print every sample's report; the exit code as ``ragas-relevancy`` gives it: 0 all scored,
    1 none, 3 some NaN (the reason says why)."""
    results = metric.batch_score(samples)
    for result in results:
        print(result.report)
        print()
    scored = sum(1 for r in results if math.isfinite(r.value))
    if scored < len(results):
        print(f"{len(results) - scored} of {len(results)} samples not scored", file=sys.stderr)
    return exit_code(scored, len(results))


def main() -> int:
    """Score two samples with Gemini and print every probe."""
    key = api_key()
    from google import genai
    from openai import AsyncOpenAI
    from ragas.llms import llm_factory

    from ragas_relevancy_ext import AnswerRelevancy, gemini_embeddings

    judge = llm_factory(
        JUDGE_MODEL,
        provider="openai",
        client=AsyncOpenAI(base_url=GEMINI_OPENAI_BASE_URL, api_key=key),
    )
    embeddings = gemini_embeddings(EMBEDDING_MODEL, client=genai.Client(api_key=key))
    return score_and_print(AnswerRelevancy(llm=judge, embeddings=embeddings, strictness=3), SAMPLES)


if __name__ == "__main__":
    sys.exit(main())
