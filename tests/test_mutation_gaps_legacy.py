"""Run settings of ``ragas.evaluate`` that the legacy metric must keep: mutation testing found
that dropping ``RunConfig.max_workers`` went unnoticed."""

from __future__ import annotations

import pytest
from ragas import EvaluationDataset, evaluate
from ragas.run_config import RunConfig

from ragas_relevancy_ext.legacy import ResponseRelevancy
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge

ROWS = [
    {"user_input": f"How do refunds work for order {i}?", "response": "Refunds take five days."}
    for i in range(3)
]


def _peak(run_config: RunConfig) -> int:
    judge = PretendJudge(latency=0.002)
    evaluate(
        EvaluationDataset.from_list(ROWS),
        metrics=[ResponseRelevancy(strictness=3, probe_prompt="angles")],
        llm=judge,
        embeddings=HashEmbeddings(),
        run_config=run_config,
        show_progress=False,
    )
    assert judge.calls >= 3 * len(ROWS)
    return judge.peak


def test_max_workers_one_keeps_one_judge_call_in_flight() -> None:
    assert _peak(RunConfig(max_workers=1)) == 1


@pytest.mark.parametrize("workers", [2, 16])
def test_max_workers_bounds_the_judge_calls_of_a_row(workers: int) -> None:
    peak = _peak(RunConfig(max_workers=workers))
    assert 1 < peak <= workers
