"""The report's numbers, clipping, table edges and JSON round trip, character for character;
and what a clean run and a run without probes put into a report."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from ragas_relevancy_ext import AnswerRelevancy, Probe, RelevancyReport
from ragas_relevancy_ext.scoring.report import clip, fmt, format_report
from ragas_relevancy_ext.scoring.usage import Usage
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge, ScriptedJudge

QUESTION = "Where is order A17?"


def report(**changes) -> RelevancyReport:
    values = dict(
        user_input=QUESTION,
        response="Order A17 shipped\non 3 March.",
        score=0.123456,
        strictness=3,
        probe_prompt="stock",
        all_noncommittal=False,
        probes=[
            Probe("When did order A17 ship?", 0, 0.98765),
            Probe("Is A17 late?", 1, -0.05),
        ],
        judge_calls=3,
        duplicates_dropped=0,
        distinct_probes=2,
        probe_similarity=0.56789,
        notes=["call 3: reply did not parse (JudgeReplyError: no JSON)"],
        reason="a reason given by hand",
        usage=Usage(3, 120, 30, 2, None, 1),
    )
    values.update(changes)
    return RelevancyReport(**values)


def test_text_table_without_probes_notes_or_similarity():
    text = format_report(
        report(probes=[], probe_similarity=None, notes=[], distinct_probes=0, score=0.0)
    )
    assert text.splitlines()[2:] == [
        "  cosine  nc  probe",
        "score 0.0000 | prompt stock | judge calls 3 | distinct 0/3 | probe similarity -",
        "usage: judge 3 request(s), 120 prompt + 30 completion tokens | embeddings 2 "
        "request(s), tokens not reported | cached 1",
        "reason: a reason given by hand",
    ]


def test_text_table_clips_a_long_response_to_160_characters():
    line = format_report(report(response="word " * 100)).splitlines()[1]
    assert line == "response: " + ("word " * 32)[:159] + "…"


@pytest.mark.parametrize(
    ("text", "width", "clipped"),
    [
        ("short", 10, "short"),
        ("exactly10!", 10, "exactly10!"),
        ("eleven char", 10, "eleven ch…"),
        ("  two\n\tlines  here ", 20, "two lines here"),
        ("", 5, ""),
    ],
)
def test_clip(text, width, clipped):
    assert clip(text, width) == clipped
    assert len(clip(text, width)) <= width


@pytest.mark.parametrize(
    ("value", "digits", "text"),
    [
        (0.123456, 4, "0.1235"),
        (0.123456, 2, "0.12"),
        (-1.0, 3, "-1.000"),
        (0, 1, "0.0"),
        (None, 4, "NaN"),
        (math.nan, 4, "NaN"),
        (math.inf, 2, "NaN"),
    ],
)
def test_fmt(value, digits, text):
    assert fmt(value, digits) == text


def test_fmt_default_is_four_digits():
    assert fmt(2 / 3) == "0.6667"


def test_to_dict_exactly_and_back():
    original = report()
    data = original.to_dict()
    assert data == {
        "user_input": QUESTION,
        "response": "Order A17 shipped\non 3 March.",
        "score": 0.123456,
        "strictness": 3,
        "probe_prompt": "stock",
        "all_noncommittal": False,
        "probes": [
            {
                "question": "When did order A17 ship?",
                "noncommittal": 0,
                "cosine": 0.98765,
                "language": None,
            },
            {"question": "Is A17 late?", "noncommittal": 1, "cosine": -0.05, "language": None},
        ],
        "judge_calls": 3,
        "duplicates_dropped": 0,
        "distinct_probes": 2,
        "probe_similarity": 0.56789,
        "notes": ["call 3: reply did not parse (JudgeReplyError: no JSON)"],
        "error": None,
        "reason": "a reason given by hand",
        "question_language": None,
        "usage": {
            "judge_requests": 3,
            "judge_prompt_tokens": 120,
            "judge_completion_tokens": 30,
            "embedding_requests": 2,
            "embedding_tokens": None,
            "cached": 1,
        },
        "cause": None,
        # the probes' sd over root 2: two values' sd is their gap over root 2
        "score_stderr": pytest.approx((0.98765 + 0.05) / 2),
    }
    again = RelevancyReport.from_dict(json.loads(json.dumps(data)))
    assert again == original
    del data["usage"]  # a report saved before usage was kept: not measured, not zero
    assert RelevancyReport.from_dict(data).usage is None


def test_nan_becomes_null_in_json_and_nan_again():
    failed = report(score=math.nan, probes=[Probe("q?", 0, math.nan)], probe_similarity=None)
    data = failed.to_dict()
    assert data["score"] is None and data["probes"][0]["cosine"] is None
    text = json.dumps(data, allow_nan=False)  # strict JSON: no NaN token
    again = RelevancyReport.from_dict(json.loads(text))
    assert math.isnan(again.score) and math.isnan(again.probes[0].cosine)
    assert isinstance(again.probes[0], Probe)


def test_a_report_without_a_reason_explains_itself():
    made = report(reason="")
    assert made.reason and made.reason != "a reason given by hand"
    assert format_report(made).endswith(f"reason: {made.reason}")


# --- what real runs put into reports ----------------------------------------------------------


@pytest.mark.parametrize("probe_prompt", ["stock", "sequential", "diverse"])
def test_a_clean_run_has_no_notes(probe_prompt):
    metric = AnswerRelevancy(PretendJudge(), HashEmbeddings(), probe_prompt=probe_prompt)
    result = metric.score(user_input=QUESTION, response="Order A17 shipped on 3 March.")
    assert result.report.notes == []
    assert "note:" not in str(result.report)
    assert len(result.report.probes) == 3 and result.value > 0


def test_no_probes_is_not_all_noncommittal():
    judge = ScriptedJudge([("", 1), ("", 1), ("", 1)])
    metric = AnswerRelevancy(judge, HashEmbeddings(), probe_prompt="stock")
    made = metric.score(user_input=QUESTION, response="Order A17 shipped.").report
    assert math.isnan(made.score)  # not measured: 0 comes only from the noncommittal rule
    assert (made.all_noncommittal, made.probes, made.judge_calls) == (False, [], 3)
    assert made.notes == [f"call {n}: dropped an empty question" for n in (1, 2, 3)]
    assert made.to_dict()["all_noncommittal"] is False


def test_languages_and_reason_are_worked_out_once_when_first_read(monkeypatch):
    import ragas_relevancy_ext.scoring.report as report_module
    from ragas_relevancy_ext.scoring.languages import detect_language

    detected: list[str] = []

    def counting(text: str) -> str | None:
        detected.append(text)
        return detect_language(text)

    monkeypatch.setattr(report_module, "detect_language", counting)
    metric = AnswerRelevancy(llm=PretendJudge(), embeddings=HashEmbeddings(64))
    rows = [{"user_input": QUESTION, "response": "Order A17 shipped on 3 March."}] * 2
    results: list = []

    async def score() -> None:  # asyncio.run shows its coroutine's result: return none
        results.extend(await metric.abatch_score(rows))

    asyncio.run(score())
    assert detected == []  # scoring alone detects nothing and writes no reason
    first = results[0].report
    assert "reason" not in vars(first) and "question_language" not in vars(first)
    data = first.to_dict()
    assert sorted(detected) == sorted([QUESTION, *(p["question"] for p in data["probes"])])
    assert data["question_language"] == "en" and data["reason"].startswith("Score ")
    assert first.to_dict() == data and len(detected) == 4  # kept, not worked out again
    # the same fields as a report built with everything given at once
    eager = RelevancyReport(
        **{
            **data,
            "probes": [Probe(**p) for p in data["probes"]],
            "reason": "",
            "question_language": "en",
            "usage": first.usage,
        }
    )
    assert eager == first and repr(eager) == repr(first)
    assert results[0].reason == first.reason == eager.reason
    assert results[1].report.reason == first.reason  # the second row's, worked out from its own
    results[1].reason = "set by hand"
    assert results[1].reason == "set by hand" and results[1].report.reason == first.reason


def test_a_pending_field_survives_a_copy_and_stays_frozen_on_probes():
    import copy
    import pickle

    probe = Probe("Where is order A17?", 0, 0.5, "")
    copied = copy.deepcopy(probe)
    assert "language" not in vars(copied)  # still to be detected
    assert pickle.loads(pickle.dumps(probe)) == probe and "language" in vars(probe)
    assert copied.language == probe.language == "en"
    with pytest.raises(AttributeError):
        probe.language = "fr"  # type: ignore[misc]
    assert Probe("Where?", 0, 0.5).language is None  # not given: not detected
    given = report(reason="")
    assert given.reason == given.reason and given.reason.startswith("Score 0.12")
