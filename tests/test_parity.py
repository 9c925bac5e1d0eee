"""Parity with stock RAGAS on the shared fixtures: same replies and embeddings, same score."""

from __future__ import annotations

import asyncio

import pytest
from conftest import load_cases, load_toy
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
    # stock keeps a whitespace-only probe and then fails to embed it; ours drops it
    replies = [("Where is order A17?", 0), ("   ", 0), ("Where is my order A17?", 0)]
    result = asyncio.run(
        compare_with_stock(
            ScriptedJudge(replies), HashEmbeddings(), "Where is order A17?", "It shipped."
        )
    )
    assert result.stock_score is None and result.difference is None
    assert "cannot be empty or whitespace only" in (result.stock_error or "")
    assert len(result.report.probes) == 2 and result.ours_score > 0.5
    assert any("empty question" in note for note in result.report.notes)
