"""Drop-in use: change one import, keep the call, and see every probe behind each score.

Runs offline with stand-ins for the judge and the embeddings, so it needs no API key:

    python examples/drop_in.py

For a real judge, swap the two stand-ins (the metric call does not change):

    from openai import AsyncOpenAI
    from ragas.llms import llm_factory
    from ragas.embeddings import OpenAIEmbeddings
    client = AsyncOpenAI()
    llm = llm_factory("gpt-4o-mini", client=client)
    embeddings = OpenAIEmbeddings(client=client, model="text-embedding-3-small")
"""

from __future__ import annotations

import os

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

# was: from ragas.metrics.collections import AnswerRelevancy
from ragas_relevancy_ext import AnswerRelevancy  # noqa: E402
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge  # noqa: E402

SAMPLES = [
    {
        "user_input": "Where is my order #48213? It was supposed to arrive yesterday.",
        "response": "Order #48213 left our warehouse on Monday and is with the courier now. "
        "It should reach you tomorrow before 6 pm.",
    },
    {
        "user_input": "When will my refund arrive?",
        "response": "I'm sorry, I don't know when your refund will arrive.",
    },
    {
        "user_input": "Can I pay with PayPal?",
        "response": "Our customer service team is available Monday to Friday, 9 am to 5 pm.",
    },
]


def main() -> None:
    """Score one sample, then a batch, printing each report in full."""
    metric = AnswerRelevancy(
        llm=PretendJudge(),
        embeddings=HashEmbeddings(),
        strictness=3,
        probe_prompt="diverse",  # or "stock" (RAGAS's prompt) or "sequential"
    )

    result = metric.score(**SAMPLES[0])  # the same call as stock RAGAS
    print(f"value {result.value:.4f}\nreason {result.reason}\n")

    for result in metric.batch_score(SAMPLES):
        print(result.report)  # question, response, every probe with its cosine and flag
        for probe in result.report.probes:  # or read the probes one by one
            assert -1.0 <= probe.cosine <= 1.0
        print()


if __name__ == "__main__":
    main()
