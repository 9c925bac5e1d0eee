"""Answer relevancy as a test: a support bot's answers gate CI. Copy this file and point
``answer`` at your app.

Runs offline (no API key) with the stand-in judge and embeddings, asked for by name (with no
judge set, every check fails as not measured)::

    pytest examples/test_support_bot.py --relevancy-judge offline --relevancy-embeddings hash

With a real judge, keeping its replies so an unchanged answer is never judged twice::

    pytest examples/test_support_bot.py --relevancy-judge openai:gpt-4o-mini \
        --relevancy-embeddings openai:text-embedding-3-small --relevancy-cache .relevancy-cache

A threshold belongs to one judge and one embeddings model: the offline stand-ins score lower
than a real judge does, hence 0.45 here. Pick yours from rated answers with
``ragas-relevancy calibrate``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragas_relevancy_ext.pytest_plugin import assert_relevant

ROWS = {
    row["id"]: row
    for row in map(json.loads, (Path(__file__).parent / "support_qa.jsonl").open(encoding="utf-8"))
}


def answer(question: str) -> str:
    """The app under test. Here: the recorded answer; in your suite, call your bot."""
    return next(row["response"] for row in ROWS.values() if row["user_input"] == question)


ON_TOPIC = ["support-01", "support-02", "support-03", "support-05", "support-06", "docs-23"]
OFF_TOPIC = ["support-07", "support-08", "support-10", "docs-27"]
EVASIVE = ["support-11", "support-12", "docs-29"]


@pytest.mark.relevancy(min_score=0.45)
@pytest.mark.parametrize("row_id", ON_TOPIC)
def test_answers_stay_relevant(row_id: str) -> None:
    # The check passes or fails here, as an assert does, with the probe table; run the tests
    # at once with pytest-xdist (pytest -n 4).
    question = ROWS[row_id]["user_input"]
    assert_relevant(question, answer(question))


@pytest.mark.parametrize("row_id", OFF_TOPIC)
def test_the_gate_catches_off_topic_answers(row_id: str, relevancy) -> None:
    # relevancy.score returns the report at once, for a test that needs the number itself.
    question = ROWS[row_id]["user_input"]
    report = relevancy.score(question, answer(question))
    assert report.score < 0.45, report


@pytest.mark.parametrize("row_id", EVASIVE)
def test_evasive_answers_score_zero(row_id: str, relevancy) -> None:
    # A probe flagged noncommittal marks an evasive answer; all of them flagged means 0.
    question = ROWS[row_id]["user_input"]
    report = relevancy.score(question, answer(question))
    assert report.all_noncommittal and report.score == 0, report
