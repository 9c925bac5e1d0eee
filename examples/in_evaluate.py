"""Inside ``ragas.evaluate``: the usual result, plus one row per probe.

Runs offline with stand-ins for the judge and the embeddings, so it needs no API key:

    python examples/in_evaluate.py

With a real judge pass ``llm=llm_factory(...)`` and real embeddings instead; nothing else changes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

import ragas  # noqa: E402
from ragas import EvaluationDataset  # noqa: E402

from ragas_relevancy_ext import ResponseRelevancy, probe_frame  # noqa: E402
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge  # noqa: E402

DATA = Path(__file__).with_name("support_qa.jsonl")


def load(limit: int = 8) -> EvaluationDataset:
    """The first ``limit`` rows of the example data, as RAGAS wants them."""
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line]
    return EvaluationDataset.from_list(
        [{"user_input": r["user_input"], "response": r["response"]} for r in rows[:limit]]
    )


def main() -> None:
    """Evaluate, print the scores, then the probes behind them."""
    metric = ResponseRelevancy(llm=PretendJudge(), embeddings=HashEmbeddings(), strictness=3)
    result = ragas.evaluate(load(), metrics=[metric], show_progress=False)
    print(result)  # {'answer_relevancy': ...}, as with stock RAGAS

    probes = probe_frame(result)  # one row per probe, indexed by the dataset's row
    print(f"{'row':>3}  {'score':>6}  {'cosine':>6}  nc  probe")
    for row, probe in probes.iterrows():
        print(
            f"{row:>3}  {probe.score:6.3f}  {probe.cosine:6.3f}  {probe.noncommittal:>2}  "
            f"{probe.question}"
        )
    print("\nweakest probe per row:")
    print(probes.groupby(level="row")["cosine"].min().round(3).to_string())


if __name__ == "__main__":
    main()
