"""The fault tests' own judge: which row a logged request served, and whether a row's end fits
the faults it met. If these were wrong, every fault test could pass on a broken metric."""

from __future__ import annotations

import math

import pytest

from ragas_relevancy_ext.testing.faults import (
    NAMED_BY,
    RECOVERABLE,
    faults_by_row,
    outcome_problem,
    request_row,
    tag_response,
)
from ragas_relevancy_ext.testing.loopback import LoggedRequest

ROWS = [
    {"user_input": "Where is order A17?", "response": tag_response(0, "It shipped.")},
    {"user_input": "Can I pay by card?", "response": tag_response(1, "Yes, Visa.")},
]


def logged(endpoint: str, body: object, fault: str | None = None) -> LoggedRequest:
    return LoggedRequest(
        number=1, endpoint=endpoint, number_on_endpoint=1, path="/", headers={}, body=body,
        fault=fault,
    )  # fmt: skip


def chat(response: str, fault: str | None = None) -> LoggedRequest:
    prompt = f'Instruction\ninput: {{"response": "{response}"}}\nOutput: '
    return logged("chat", {"messages": [{"role": "user", "content": prompt}]}, fault)


@pytest.mark.parametrize(
    ("faults", "score", "error", "problem"),
    [
        (set(), 0.8, None, None),
        ({"rate_limit@chat", "hang@embeddings"}, 0.8, None, None),
        ({"malformed@chat"}, 0.1, None, None),
        (set(), math.nan, "boom", "NaN after recoverable faults only []: boom"),
        (
            {"server_error@chat"},
            math.nan,
            "RuntimeError: gave up",
            "NaN after recoverable faults only ['server_error@chat']: RuntimeError: gave up",
        ),
        (
            {"nan@embeddings"},
            0.51234,
            None,
            "scored 0.5123 despite ['nan@embeddings']",
        ),
        (
            {"nan@embeddings", "rate_limit@chat"},
            math.nan,
            "EmbeddingShapeError: returned a vector with NaN or infinite values",
            None,
        ),
        (
            {"wrong_count@embeddings"},
            math.nan,
            "EmbeddingShapeError: returned a vector with NaN or infinite values",
            "NaN, but the reason names none of ['wrong_count@embeddings']: "
            "EmbeddingShapeError: returned a vector with NaN or infinite values",
        ),
        (
            {"mixed_size@embeddings"},
            math.nan,
            None,
            "NaN, but the reason names none of ['mixed_size@embeddings']: None",
        ),
        (
            {"mixed_size@embeddings", "wrong_size@embeddings"},
            math.nan,
            "x for the question but vectors of length 3",
            None,
        ),
    ],
)
def test_outcome_problem(faults, score, error, problem):
    assert outcome_problem(faults, score, error) == problem


@pytest.mark.parametrize("fault", sorted(NAMED_BY))
def test_every_lasting_fault_needs_nan_and_its_own_phrase(fault):
    assert fault not in RECOVERABLE
    assert outcome_problem({fault}, 0.5, None) is not None
    assert outcome_problem({fault}, math.nan, "unrelated") is not None
    for phrase in NAMED_BY[fault]:
        assert outcome_problem({fault}, math.nan, f"EmbeddingShapeError: {phrase}") is None


def test_requests_are_matched_to_their_rows():
    requests = [
        chat(ROWS[1]["response"], fault="rate_limit"),
        logged("embeddings", {"input": ["Where is order A17?"]}, fault="nan"),
        logged("embeddings", {"input": ["(ref 1) Can I pay?", "(ref 1) Visa?"]}, fault="hang"),
        logged("embeddings", {"input": "Where is order A17?"}, fault="wrong_size"),
        logged("embeddings", {"input": ["unrelated text"]}, fault="nan"),
        chat("someone else's response", fault="malformed"),
        chat(ROWS[0]["response"]),  # no fault: counted for nobody
    ]
    assert [request_row(r, ROWS) for r in requests] == [1, 0, 1, 0, None, None, 0]
    assert faults_by_row(requests, ROWS) == [
        {"nan@embeddings", "wrong_size@embeddings"},
        {"rate_limit@chat", "hang@embeddings"},
    ]


def test_a_chat_request_without_a_prompt_input_is_nobodys():
    broken = logged("chat", {"messages": [{"role": "user", "content": "no input here"}]}, "hang")
    assert request_row(broken, ROWS) is None
    assert request_row(logged("chat", "not json", "hang"), ROWS) is None
    assert faults_by_row([broken], ROWS) == [set(), set()]
