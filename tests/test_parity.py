"""Parity with stock RAGAS on the shared fixtures: same replies and embeddings, same score."""

from __future__ import annotations

import asyncio
import json
import math
import random
import zlib
from typing import Any

import numpy as np
import pytest
from common import FIXTURES, load_cases, load_toy
from ragas.embeddings.base import BaseRagasEmbedding
from ragas.metrics.collections import AnswerRelevancy as StockAnswerRelevancy

from ragas_relevancy_ext import AnswerRelevancy, compare_with_stock
from ragas_relevancy_ext.testing.offline import HashEmbeddings, LookupEmbeddings, ScriptedJudge

CASES = load_cases()
EMBEDDINGS = {"hash32": lambda: HashEmbeddings(32), "hash256": lambda: HashEmbeddings(256)}


def test_fixtures_cover_the_seeds_and_enough_own_cases():
    sources = {c["source"] for c in CASES}
    assert {"seed 002", "seed 003", "seed 004"} <= sources
    assert sum(c["source"] == "own" for c in CASES) >= 20
    assert {c["kind"] for c in CASES} == {
        "on-topic",
        "off-topic",
        "evasive",
        "padded",
        "incomplete",
    }
    technest = next(c for c in CASES if c["id"] == "technest-return-policy")
    assert [q for q, _ in technest["replies"]] == [
        "What is TechNest's return policy regarding returns and refunds?",
        "What are the conditions for returning items to TechNest?",
        "What are the conditions for returning items to TechNest?",
    ]


def _both(case, embeddings):
    stock_judge = ScriptedJudge(case["replies"])
    ours_judge = ScriptedJudge(case["replies"])
    stock = StockAnswerRelevancy(llm=stock_judge, embeddings=embeddings, strictness=3)
    ours = AnswerRelevancy(
        llm=ours_judge, embeddings=embeddings, strictness=3, probe_prompt="stock"
    )
    stock_score = stock.score(user_input=case["user_input"], response=case["response"]).value
    ours_result = ours.score(user_input=case["user_input"], response=case["response"])
    return stock_score, ours_result, stock_judge, ours_judge


@pytest.mark.parametrize("embeddings_name", sorted(EMBEDDINGS))
@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_same_score_and_same_prompts_as_stock(case, embeddings_name):
    embeddings = EMBEDDINGS[embeddings_name]()
    stock_score, ours, stock_judge, ours_judge = _both(case, embeddings)
    assert abs(stock_score - ours.value) <= 1e-9
    assert ours_judge.prompts == stock_judge.prompts
    assert len(ours_judge.prompts) == 3
    # the report shows every reply, duplicates included, as stock counted them
    assert [p.question for p in ours.report.probes] == [q for q, _ in case["replies"] if q]


def test_seed_004_toy_vectors_reproduce_0_7463_on_both():
    toy = load_toy()
    stock_score, ours, _, _ = _both(toy, LookupEmbeddings(toy["vectors"]))
    assert round(stock_score, 4) == toy["expected_score"] == round(ours.value, 4)
    assert [round(p.cosine, 4) for p in ours.report.probes] == toy["expected_cosines"]


def test_evasive_fixtures_score_zero_on_both():
    evasive = [c for c in CASES if c["kind"] == "evasive"]
    assert evasive
    for case in evasive:
        stock_score, ours, _, _ = _both(case, HashEmbeddings())
        assert stock_score == ours.value == 0.0
        assert ours.report.all_noncommittal


def test_compare_with_stock_records_and_replays_one_judge():
    case = next(c for c in CASES if c["id"] == "technest-return-policy")
    judge = ScriptedJudge(case["replies"])
    result = asyncio.run(
        compare_with_stock(judge, HashEmbeddings(), case["user_input"], case["response"])
    )
    assert judge.calls == 3  # the judge is asked once per probe, by stock only
    assert result.same_prompts and result.difference is not None
    assert result.difference <= 1e-9
    assert result.report.distinct_probes == 2


def test_compare_with_stock_reports_a_stock_failure_instead_of_crashing():
    # stock keeps a whitespace-only probe and then fails to embed it; ours drops it, noted
    replies = [("Where is order A17?", 0), ("   ", 0), ("Where is my order A17?", 0)]
    result = asyncio.run(
        compare_with_stock(
            ScriptedJudge(replies), HashEmbeddings(), "Where is order A17?", "It shipped."
        )
    )
    assert result.stock_score is None and result.difference is None
    assert "cannot be empty or whitespace only" in (result.stock_error or "")
    assert len(result.report.probes) == 2 and result.ours_score > 0.5
    assert result.report.notes == ["call 2: dropped a whitespace-only question"]


# -- fixtures that can find differences: mixed flags, strictness 1/3/5, fewer and more replies,
# -- probes with white space and unicode around them, vectors far from unit length or near zero


class CharEmbeddings(BaseRagasEmbedding):
    """Counts of hashed character trigrams, white space included: never unit length, and a
    probe with a space around it gets another vector than the same probe without."""

    def embed_text(self, text: str, **kwargs: Any) -> list[float]:
        vector = [0.0] * 64
        padded = f"^{text}$"
        for i in range(len(padded) - 2):
            vector[zlib.crc32(padded[i : i + 3].encode()) % 64] += 1.0
        return vector

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        return self.embed_text(text)


class SeededEmbeddings(BaseRagasEmbedding):
    """A random vector per text (seeded by the text), scaled from 1e-7 to 1e3 and sometimes
    negative, so cosines cover the whole range and norms are anything but 1."""

    def embed_text(self, text: str, **kwargs: Any) -> list[float]:
        rng = np.random.default_rng(zlib.crc32(text.encode()))
        scale = 10.0 ** rng.integers(-7, 4)
        return (rng.normal(size=8) * scale).tolist()

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        return self.embed_text(text)


HARD = json.loads((FIXTURES / "parity_cases.json").read_text(encoding="utf-8"))


def _hard_embeddings(case: dict[str, Any], name: str) -> BaseRagasEmbedding:
    if "vectors" in case:
        return LookupEmbeddings(case["vectors"])
    return CharEmbeddings() if name == "char" else HashEmbeddings(32)


async def _stock_and_ours(
    case: dict[str, Any], embeddings: BaseRagasEmbedding
) -> tuple[float, Any, ScriptedJudge, ScriptedJudge]:
    strictness = case["strictness"]
    stock_judge, ours_judge = ScriptedJudge(case["replies"]), ScriptedJudge(case["replies"])
    stock = StockAnswerRelevancy(llm=stock_judge, embeddings=embeddings, strictness=strictness)
    ours = AnswerRelevancy(
        llm=ours_judge, embeddings=embeddings, strictness=strictness, probe_prompt="stock"
    )
    stock_score = await stock.ascore(user_input=case["user_input"], response=case["response"])
    ours_result = await ours.ascore(case["user_input"], case["response"])
    return stock_score.value, ours_result, stock_judge, ours_judge


def _assert_same_as_stock(case, stock_score, ours, stock_judge, ours_judge):
    used = [(q, f) for q, f in case["replies"][: case["strictness"]] if q]
    if used:
        assert abs(stock_score - ours.value) <= 1e-9, (case["id"], stock_score, ours.value)
    else:  # no question at all: stock says 0, ours "not measured"
        assert stock_score == 0.0 and math.isnan(ours.value), (case["id"], ours.value)
    assert ours_judge.prompts == stock_judge.prompts
    assert ours_judge.calls == case["strictness"]
    # every kept reply exactly as the judge wrote it: no stripping, duplicates kept
    assert [(p.question, p.noncommittal) for p in ours.report.probes] == used
    assert ours.report.all_noncommittal == bool(used and all(f for _, f in used))


def test_hard_fixtures_cover_what_uniform_fixtures_cannot():
    flags = [{f for _, f in c["replies"][: c["strictness"]]} for c in HARD]
    assert any(f == {0, 1} for f in flags)
    assert {c["strictness"] for c in HARD} >= {1, 3, 5}
    assert any(len(c["replies"]) > c["strictness"] for c in HARD)
    assert any(sum(1 for q, _ in c["replies"] if q) < c["strictness"] for c in HARD)
    questions = [q for c in HARD for q, _ in c["replies"]]
    assert any(q and q != q.strip() for q in questions)
    assert any(not q.isascii() for q in questions)
    norms = [np.linalg.norm(v) for c in HARD for v in c.get("vectors", {}).values()]
    assert min(norms) < 1e-8 and max(norms) > 100


# a case with its own vectors runs once, on them; the others on both text embeddings
HARD_RUNS = [
    (case, name)
    for case in HARD
    for name in (["lookup"] if "vectors" in case else ["char", "hash32"])
]


@pytest.mark.parametrize(
    ("case", "embeddings_name"), HARD_RUNS, ids=[f"{c['id']}-{n}" for c, n in HARD_RUNS]
)
def test_hard_fixtures_match_stock(case, embeddings_name):
    both = asyncio.run(_stock_and_ours(case, _hard_embeddings(case, embeddings_name)))
    _assert_same_as_stock(case, *both)


def test_whitespace_fixtures_would_catch_stripping():
    """The white-space case scores differently once its probes are stripped: parity on it
    fails for any stock mode that cleans replies."""
    case = next(c for c in HARD if c["id"] == "whitespace-around-probes")
    stripped = {**case, "replies": [[q.strip(), f] for q, f in case["replies"]]}
    as_written, _, _, _ = asyncio.run(_stock_and_ours(case, CharEmbeddings()))
    cleaned, _, _, _ = asyncio.run(_stock_and_ours(stripped, CharEmbeddings()))
    assert abs(as_written - cleaned) > 0.01


_WORDS = ["order", "A17", "ship", "refund", "café", "naïve", "東京", "Straße", "card", "policy"]
_PADDING = ["", "", "", " ", "  ", "\n", "\t", "\u00a0", "\u3000"]


def _random_case(rng: random.Random, number: int) -> dict[str, Any]:
    strictness = rng.choice([1, 2, 3, 4, 5])
    pool = [" ".join(rng.sample(_WORDS, rng.randint(1, 4))) + "?" for _ in range(3)]
    replies = []
    for _ in range(strictness + rng.choice([0, 0, 1, 2])):
        question = "" if rng.random() < 0.15 else rng.choice(pool)
        if question:
            question = rng.choice(_PADDING) + question + rng.choice(_PADDING)
        replies.append([question, int(rng.random() < 0.4)])
    return {
        "id": f"random-{number}",
        "strictness": strictness,
        "user_input": " ".join(rng.sample(_WORDS, 3)) + "?",
        "response": "An answer.",
        "replies": replies,
    }


def test_randomised_cases_match_stock():
    rng = random.Random(20240613)
    cases = [_random_case(rng, n) for n in range(300)]
    embeddings = SeededEmbeddings()

    async def run_all():
        return [await _stock_and_ours(case, embeddings) for case in cases]

    for case, both in zip(cases, asyncio.run(run_all()), strict=True):
        _assert_same_as_stock(case, *both)
    # the generator reaches what the hand fixtures cover
    assert any(not any(q for q, _ in c["replies"][: c["strictness"]]) for c in cases)
    assert any({f for q, f in c["replies"][: c["strictness"]] if q} == {0, 1} for c in cases)
