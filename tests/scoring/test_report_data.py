"""The report's numbers, clipping, table edges and JSON round trip, character for character;
what a clean run and a run without probes put into a report; and a row's key, the rule that
sets a row aside, and text made safe for JSON."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math

import pytest

from ragas_relevancy_ext import AnswerRelevancy, Probe, RelevancyReport
from ragas_relevancy_ext.errors import Cause
from ragas_relevancy_ext.scoring.report import (
    as_text,
    clean_text,
    clip,
    fmt,
    format_report,
    input_problem,
    json_safe,
    row_key,
)
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
        (-math.inf, 4, "NaN"),
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


def test_every_number_survives_json_and_a_minimal_line_loads():
    made = report(
        probes=[Probe("Q1?", 0, 0.9), Probe("Q2?", 0, math.nan)],
        probe_similarity=math.inf,
        score=0.5,
        score_stderr=0.125,
    )
    data = made.to_dict()
    assert (data["score"], data["score_stderr"], data["probe_similarity"]) == (0.5, 0.125, None)
    assert [p["cosine"] for p in data["probes"]] == [0.9, None]
    back = RelevancyReport.from_dict(json.loads(json.dumps(data)))
    assert back.score_stderr == 0.125 and back.probes[0] == Probe("Q1?", 0, 0.9)
    minimal = {k: data[k] for k in ("user_input", "response", "strictness", "probe_prompt")}
    bare = RelevancyReport.from_dict({**minimal, "score": 1, "all_noncommittal": False})
    assert bare.probes == [] and bare.score == 1.0 and isinstance(bare.score, float)
    flagged = RelevancyReport.from_dict(
        {**data, "probes": [{"question": "Q?", "noncommittal": True, "cosine": 1}]}
    )
    assert flagged.probes == [Probe("Q?", 1, 1.0)]
    assert type(flagged.probes[0].noncommittal) is int


def test_given_readings_are_kept_and_empty_ones_worked_out():
    given = report(reason="given", question_language="de", score_stderr=0.25)
    assert (given.reason, given.question_language, given.score_stderr) == ("given", "de", 0.25)
    probes = [Probe("Q1?", 0, 0.9), Probe("Q2?", 0, 0.7)]
    assert report(probes=probes, score_stderr=None).score_stderr == pytest.approx(0.1)
    assert report(probes=probes).score_stderr == pytest.approx(0.1)
    assert report(question_language="").question_language == "en"


def test_a_cause_is_read_back_and_set_for_a_report_without_probes():
    def failed(**changes) -> RelevancyReport:
        return report(score=math.nan, probes=[], reason="", **changes)

    assert failed().cause is Cause.NO_USABLE_PROBE
    assert failed(error="E: x").cause is None
    assert report(score=math.nan).cause is None  # probes, a score not finite: no cause given
    assert report(score=0.0, probes=[]).cause is None
    assert failed(cause="auth").cause is Cause.AUTH
    assert failed(cause="newer_cause").cause == "newer_cause"  # a later version's: kept
    data = failed(error="E: x", cause=Cause.TIMEOUT).to_dict()
    assert data["cause"] == "timeout"
    assert RelevancyReport.from_dict(data).cause is Cause.TIMEOUT
    assert report().to_dict()["cause"] is None


# --- rows: set aside, keyed, made safe for JSON -----------------------------------------------


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ({"user_input": None, "response": None}, "empty row"),
        ({"user_input": " ", "response": "\n"}, "empty row"),
        ({}, "empty row"),
        ({"user_input": "Q?", "response": None}, "no response"),
        ({"response": "A."}, "no user_input"),
        ({"user_input": "Q?", "response": math.nan}, "response is NaN, not text"),
        ({"user_input": math.inf, "response": "A."}, "user_input is Infinity, not text"),
        ({"user_input": "Q?", "response": -math.inf}, "response is -Infinity, not text"),
        ({"user_input": 3, "response": "A."}, "user_input is int, not text"),
        ({"user_input": "Q?", "response": 2.5}, "response is float, not text"),
        ({"user_input": "Q?", "response": "  "}, "response is empty"),
        ({"user_input": "", "response": "A."}, "user_input is empty"),
        ({"user_input": "Q?", "response": "A.", "extra": None}, None),
    ],
)
def test_input_problem_names_each_unscorable_row(record, problem):
    assert input_problem(record) == problem


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def test_row_key_is_20_hex_digits_of_sha256_over_the_tag_and_texts():
    assert row_key("Q?", "A.") == _sha("\x00Q?\x00A.")
    assert row_key("Q?", "A.", "tag") == _sha("tag\x00Q?\x00A.")
    assert row_key(3, None, "t") == _sha("t\x00\x013\x00\x01null")
    assert row_key("Q?", {"a": 1}) == _sha('\x00Q?\x00\x01{"a": 1}')
    # values JSON cannot hold are written as their text
    assert row_key("Q?", b"x") == _sha("\x00Q?\x00\x01\"b'x'\"")
    assert row_key("Q\ud800", "A.") == _sha("\x00Q\ufffd\x00A.")


def test_row_key_of_a_row_set_aside_names_the_problem():
    assert row_key(3, "A.", "t", "user_input is int, not text") == _sha(
        "t|skipped|user_input is int, not text\x00\x00A."
    )
    assert row_key("Q\ud800", None, "", "no response") == _sha(
        "|skipped|no response\x00Q\ufffd\x00"
    )
    assert row_key("Q?", "A.", "t", "x") != row_key("Q?", "A.", "t")


def test_as_text_and_clean_text():
    assert as_text(3) == ""
    assert as_text(None) == ""
    assert as_text("plain") == "plain"
    assert as_text("a\udc80b") == "a\ufffdb"
    assert clean_text("é\ud83d") == "é\ufffd"
    assert clean_text("ascii") == "ascii"
    assert clean_text("\ud7ff\ue000") == "\ud7ff\ue000"  # just outside the surrogates


def test_json_safe_at_any_depth():
    value = {
        "k\ud800": [1.5, math.nan, ("x\udfff", math.inf)],
        3: {"inner": -math.inf, "ok": True},
        "n": None,
    }
    assert json_safe(value) == {
        "k\ufffd": [1.5, None, ["x\ufffd", None]],
        3: {"inner": None, "ok": True},
        "n": None,
    }
    assert json_safe("t\ud800") == "t\ufffd"
    assert json_safe(2.0) == 2.0
    assert json_safe(7) == 7
    json.dumps(json_safe(value), allow_nan=False)


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

    assert Probe("x", 0, 0.5, "ja").language == "ja"  # given: kept
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
