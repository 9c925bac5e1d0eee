"""Both metric flavours pickle, deep-copy and cloudpickle (as Ray ships them) like stock's, and
the copy scores as the original does; per-run state (limiters, locks, translations) starts empty.
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import pickle
from collections.abc import Callable
from typing import Any

import pytest
from ragas.dataset_schema import SingleTurnSample

from ragas_relevancy_ext import AnswerRelevancy, ResponseRelevancy, answer_relevancy
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge

QUESTION = "How do I get a refund for a damaged blender?"
ANSWER = "Send us a photo of the damaged blender and the refund reaches your card in 5 days."

WAYS: dict[str, Callable[[Any], Any]] = {
    "pickle": lambda m: pickle.loads(pickle.dumps(m)),
    "deepcopy": copy.deepcopy,
}
if importlib.util.find_spec("ray") is not None:  # the [ray] extra: how Ray ships a metric
    import ray.cloudpickle

    WAYS["ray.cloudpickle"] = lambda m: ray.cloudpickle.loads(ray.cloudpickle.dumps(m))


def modern(**options: Any) -> AnswerRelevancy:
    return AnswerRelevancy(llm=PretendJudge(), embeddings=HashEmbeddings(), **options)


def legacy(**options: Any) -> ResponseRelevancy:
    return ResponseRelevancy(llm=PretendJudge(), embeddings=HashEmbeddings(), **options)


def score(metric: Any) -> float:
    """The metric's score of the one pair, through the flavour's own scoring call."""
    if isinstance(metric, AnswerRelevancy):
        return metric.score(user_input=QUESTION, response=ANSWER).value
    sample = SingleTurnSample(user_input=QUESTION, response=ANSWER)
    return asyncio.run(metric.single_turn_ascore(sample))


def adapted(metric: Any) -> Any:
    """The metric's store of translated prompts."""
    return metric.adapted if isinstance(metric, AnswerRelevancy) else metric._adapted


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("make", [modern, legacy], ids=["modern", "legacy"])
@pytest.mark.parametrize("scored_first", [False, True], ids=["fresh", "after-a-score"])
def test_a_copied_metric_scores_as_the_original(make: Any, way: str, scored_first: bool) -> None:
    original = make(strictness=4)
    first = score(original) if scored_first else None
    restored = WAYS[way](original)
    assert type(restored) is type(original) and restored.strictness == 4
    assert restored.probe_prompt == original.probe_prompt
    again = score(restored)
    assert again == (first if scored_first else score(original))


@pytest.mark.parametrize("way", WAYS)
def test_the_ready_instance_copies_and_scores_as_a_new_metric(way: str) -> None:
    restored = WAYS[way](answer_relevancy)
    assert type(restored) is ResponseRelevancy and restored.name == "answer_relevancy"
    assert restored.llm is None and restored.embeddings is None  # as the original: none set
    restored.llm, restored.embeddings = PretendJudge(), HashEmbeddings()
    assert score(restored) == score(legacy())


@pytest.mark.parametrize("make", [modern, legacy], ids=["modern", "legacy"])
def test_translations_are_not_pickled_a_copy_translates_again(make: Any) -> None:
    original = make(language="french")
    before = score(original)
    assert len(adapted(original)) == 1
    restored = pickle.loads(pickle.dumps(original))
    assert len(adapted(restored)) == 0
    assert score(restored) == before
    assert len(adapted(restored)) == 1


@pytest.mark.parametrize("ours", [AnswerRelevancy, ResponseRelevancy], ids=["modern", "legacy"])
def test_a_judge_that_cannot_pickle_fails_as_stocks_metric_does(ours: Any) -> None:
    """An openai client holds a lock: the metric fails on it, the same way stock's does."""
    from openai import AsyncOpenAI
    from ragas.llms import llm_factory
    from ragas.metrics import ResponseRelevancy as StockLegacy
    from ragas.metrics.collections import AnswerRelevancy as StockModern

    client = AsyncOpenAI(api_key="test", base_url="http://127.0.0.1:9/v1")
    judge = llm_factory("gpt-4o-mini", provider="openai", client=client)
    stock = StockModern if ours is AnswerRelevancy else StockLegacy
    failures = []
    for cls in (stock, ours):
        with pytest.raises(Exception) as caught:
            pickle.dumps(cls(llm=judge, embeddings=HashEmbeddings()))
        failures.append((type(caught.value), str(caught.value)))
    assert failures[0] == failures[1]
