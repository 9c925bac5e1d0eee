"""Parity with stock legacy RAGAS inside ``ragas.evaluate``: same replies, same score, same text.

Stock legacy ``ragas.metrics.AnswerRelevancy`` and ours (``probe_prompt="stock"``) score every
shared fixture in one ``evaluate`` run each, with a ``BaseRagasLLM`` judge (a LangChain chat model
behind ``LangchainLLMWrapper``, with which stock makes all ``strictness`` probes) scripted per
response, and the same embeddings.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from common import load_cases, load_toy
from langchain_core.embeddings import Embeddings
from ragas import EvaluationDataset, evaluate
from ragas.embeddings.base import LangchainEmbeddingsWrapper
from ragas.llms.base import LangchainLLMWrapper
from ragas.metrics import AnswerRelevancy as StockLegacy
from ragas.prompt.pydantic_prompt import FixOutputFormat

from ragas_relevancy_ext import ResponseRelevancy, reports_for
from ragas_relevancy_ext.scoring.prompts import ResponseRelevanceInput, ResponseRelevancePrompt
from ragas_relevancy_ext.testing.offline import (
    LangchainHashEmbeddings,
    LookupEmbeddings,
    ScriptedChatModel,
)

CASES = load_cases()


class LangchainLookupEmbeddings(Embeddings):
    """LookupEmbeddings' fixed vectors behind LangChain's embed_query/embed_documents."""

    def __init__(self, vectors: dict[str, list[float]]):
        self.lookup = LookupEmbeddings(vectors)

    def embed_query(self, text: str) -> list[float]:
        return self.lookup.embed_text(text)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.lookup.embed_text(text) for text in texts]


def run_both(cases: list[dict[str, Any]], strictness: int, embeddings: Embeddings) -> dict:
    """Each flavour in its own evaluate run over ``cases``: scores, prompts sent, traces."""
    rows = [{"user_input": c["user_input"], "response": c["response"]} for c in cases]
    runs = {}
    for name, metric in (
        ("stock", StockLegacy(strictness=strictness)),
        ("ours", ResponseRelevancy(strictness=strictness, probe_prompt="stock")),
    ):
        chat = ScriptedChatModel(replies={c["response"]: c["replies"] for c in cases})
        result = evaluate(
            EvaluationDataset.from_list(rows),
            metrics=[metric],
            llm=LangchainLLMWrapper(chat),
            embeddings=LangchainEmbeddingsWrapper(embeddings),
            show_progress=False,
        )
        runs[name] = (list(result["answer_relevancy"]), chat.prompts, result)
    return runs


@pytest.mark.parametrize("strictness", [1, 3, 5])
def test_same_scores_and_same_prompt_text_as_stock_legacy(strictness: int) -> None:
    runs = run_both(CASES, strictness, LangchainHashEmbeddings(32))
    stock_scores, stock_prompts, _ = runs["stock"]
    ours_scores, ours_prompts, ours_result = runs["ours"]
    assert len(ours_scores) == len(CASES)
    for case, stock, ours in zip(CASES, stock_scores, ours_scores, strict=True):
        assert abs(stock - ours) <= 1e-9, case["id"]
    # the same text, as often: stock legacy's prompt, strictness times per row
    assert Counter(ours_prompts) == Counter(stock_prompts)
    expected = Counter(
        {
            ResponseRelevancePrompt().to_string(ResponseRelevanceInput(response=c["response"])): (
                strictness
            )
            for c in CASES
        }
    )
    assert Counter(ours_prompts) == expected
    # every reply became a probe, as stock counts them
    for case, report in zip(CASES, reports_for(ours_result), strict=True):
        assert len(report.probes) == strictness, case["id"]


def test_seed_004_toy_vectors_reproduce_0_7463_on_both_in_evaluate() -> None:
    toy = load_toy()
    runs = run_both([toy], 3, LangchainLookupEmbeddings(toy["vectors"]))
    stock, ours = runs["stock"][0][0], runs["ours"][0][0]
    assert round(stock, 4) == toy["expected_score"] == round(ours, 4)
    assert abs(stock - ours) <= 1e-9


def test_evasive_fixtures_score_zero_on_both_in_evaluate() -> None:
    evasive = [c for c in CASES if c["kind"] == "evasive"]
    assert evasive
    runs = run_both(evasive, 3, LangchainHashEmbeddings())
    assert runs["stock"][0] == runs["ours"][0] == [0.0] * len(evasive)


def test_a_reply_that_does_not_parse_is_repaired_as_stock_legacy_repairs_it() -> None:
    # stock legacy sends RAGAS's fix_output_format request to the judge; so does ours ("stock")
    case = next(c for c in CASES if c["id"] == "technest-return-policy")
    (first, flag), *rest = case["replies"]
    broken = dict(case, replies=[f"Sure! question: {first}", *rest])
    fixed = json.dumps({"text": json.dumps({"question": first, "noncommittal": flag})})
    runs = {}
    for name, metric in (
        ("stock", StockLegacy(strictness=3)),
        ("ours", ResponseRelevancy(strictness=3, probe_prompt="stock")),
    ):
        # a repair prompt holds no response: its reply is scripted under ""
        chat = ScriptedChatModel(replies={broken["response"]: broken["replies"], "": [fixed]})
        result = evaluate(
            EvaluationDataset.from_list([{k: case[k] for k in ("user_input", "response")}]),
            metrics=[metric],
            llm=LangchainLLMWrapper(chat),
            embeddings=LangchainEmbeddingsWrapper(LangchainHashEmbeddings()),
            show_progress=False,
        )
        runs[name] = (result["answer_relevancy"][0], chat.prompts, result)
    stock, ours = runs["stock"], runs["ours"]
    assert abs(stock[0] - ours[0]) <= 1e-9
    assert Counter(ours[1]) == Counter(stock[1]) and len(ours[1]) == 4
    assert sum(p.startswith(FixOutputFormat.instruction) for p in ours[1]) == 1
    report = reports_for(ours[2])[0]
    assert report.judge_calls == 4 and len(report.probes) == 3
    assert any("1 RAGAS repair request(s)" in note for note in report.notes)
