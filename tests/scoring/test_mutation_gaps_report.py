"""Report helpers word for word: mutation testing of ``scoring/report.py`` found these inputs
(rows set aside, row keys, JSON safety, failure reasons, language tags) unchecked by the
faster test files."""

from __future__ import annotations

import hashlib
import json
import math

import pytest

from ragas_relevancy_ext.errors import Cause
from ragas_relevancy_ext.scoring.report import (
    Probe,
    RelevancyReport,
    as_text,
    clean_text,
    explain,
    fmt,
    format_report,
    input_problem,
    json_safe,
    language_tag,
    neutralise_controls,
    not_scored_cause,
    not_scored_reason,
    plural,
    pull_downs,
    row_key,
    weak_point,
)
from ragas_relevancy_ext.scoring.usage import Usage


def made(*cosines: float, **changes: object) -> RelevancyReport:
    """A report on probes "Probe 0?", "Probe 1?"... with these cosines and their mean as score."""
    values: dict[str, object] = dict(
        user_input="Where is order A17?",
        response="Order A17 shipped on 3 March.",
        score=sum(cosines) / len(cosines) if cosines else 0.0,
        strictness=len(cosines) or 3,
        probe_prompt="diverse",
        all_noncommittal=False,
        probes=[Probe(f"Probe {i}?", 0, c, None) for i, c in enumerate(cosines)],
        judge_calls=1,
        distinct_probes=len(cosines),
        question_language=None,
    )
    values.update(changes)
    return RelevancyReport(**values)  # type: ignore[arg-type]


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
def test_input_problem_names_each_unscorable_row(record: dict, problem: str | None) -> None:
    assert input_problem(record) == problem


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def test_row_key_is_20_hex_digits_of_sha256_over_the_tag_and_texts() -> None:
    assert row_key("Q?", "A.") == _sha("\x00Q?\x00A.")
    assert row_key("Q?", "A.", "tag") == _sha("tag\x00Q?\x00A.")
    assert row_key(3, None, "t") == _sha("t\x00\x013\x00\x01null")
    assert row_key("Q?", {"a": 1}) == _sha('\x00Q?\x00\x01{"a": 1}')
    # values JSON cannot hold are written as their text
    assert row_key("Q?", b"x") == _sha("\x00Q?\x00\x01\"b'x'\"")
    assert row_key("Q\ud800", "A.") == _sha("\x00Q\ufffd\x00A.")


def test_row_key_of_a_row_set_aside_names_the_problem() -> None:
    assert row_key(3, "A.", "t", "user_input is int, not text") == _sha(
        "t|skipped|user_input is int, not text\x00\x00A."
    )
    assert row_key("Q\ud800", None, "", "no response") == _sha(
        "|skipped|no response\x00Q\ufffd\x00"
    )
    assert row_key("Q?", "A.", "t", "x") != row_key("Q?", "A.", "t")


def test_as_text_and_clean_text() -> None:
    assert as_text(3) == ""
    assert as_text(None) == ""
    assert as_text("plain") == "plain"
    assert as_text("a\udc80b") == "a\ufffdb"
    assert clean_text("é\ud83d") == "é\ufffd"
    assert clean_text("ascii") == "ascii"
    assert clean_text("\ud7ff\ue000") == "\ud7ff\ue000"  # just outside the surrogates


def test_json_safe_at_any_depth() -> None:
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


@pytest.mark.parametrize(
    ("cause", "error", "embeddings", "text"),
    [
        (Cause.AUTH, "401", False, "Not scored (auth): the judge refused the API key: 401"),
        (Cause.AUTH, "401", True, "Not scored (auth): the embeddings refused the API key: 401"),
        ("auth", "401", False, "Not scored (auth): the judge refused the API key: 401"),
        ("from_the_future", "x", False, "Not scored (from_the_future): x"),
    ],
)
def test_not_scored_reason(cause: Cause | str, error: str, embeddings: bool, text: str) -> None:
    assert not_scored_reason(cause, error, embeddings) == text


def test_not_scored_reason_is_for_the_judge_by_default() -> None:
    assert not_scored_reason(Cause.TIMEOUT, "slow") == (
        "Not scored (timeout): the judge did not answer in time: slow"
    )


def test_a_failed_reports_reason_names_judge_or_embeddings() -> None:
    judge = made(score=math.nan, error="RateLimitError: 429", cause=Cause.RATE_LIMITED)
    assert judge.reason == (
        "Not scored (rate_limited): the judge answered rate limited (429): RateLimitError: 429"
    )
    for kind in ("EmbeddingCallError", "EmbeddingShapeError"):
        failed = made(score=math.nan, error=f"{kind}: bad", cause="embeddings_error")
        assert failed.cause is Cause.EMBEDDINGS_ERROR
        assert explain(failed).startswith("Not scored (embeddings_error): ")
        assert failed.reason.endswith(f": {kind}: bad")
    for kind in ("EmbeddingCallError", "EmbeddingShapeError"):
        timeout = made(score=math.nan, error=f"{kind}: t", cause=Cause.TIMEOUT)
        assert timeout.reason == (
            f"Not scored (timeout): the embeddings did not answer in time: {kind}: t"
        )
    skipped = made(score=math.nan, error="skipped: no response", cause=Cause.BAD_INPUT)
    assert skipped.reason == "Not scored: skipped: no response"


def test_not_scored_cause_in_one_word() -> None:
    assert not_scored_cause(made(score=math.nan, error="skipped: empty row")) == "skipped"
    skipped_with_cause = made(score=math.nan, error="skipped: x", cause=Cause.BAD_INPUT)
    assert not_scored_cause(skipped_with_cause) == "skipped"
    assert not_scored_cause(made(score=math.nan, error="E: x", cause=Cause.AUTH)) == "auth"
    assert not_scored_cause(made(score=math.nan, error="ValueError: a: b")) == "ValueError"
    assert not_scored_cause(made(score=math.nan)) == "no_usable_probe"
    assert not_scored_cause(made(0.5, score=math.nan)) == "no_usable_probe"


def test_cause_is_read_back_and_set_for_a_report_without_probes() -> None:
    assert made(score=math.nan).cause is Cause.NO_USABLE_PROBE
    assert made(score=math.nan, error="E: x").cause is None
    assert made(0.5, score=math.nan).cause is None
    assert made(score=0.0).cause is None
    assert made(score=math.nan, cause="auth").cause is Cause.AUTH
    assert made(score=math.nan, cause="newer_cause").cause == "newer_cause"
    data = made(score=math.nan, error="E: x", cause=Cause.TIMEOUT).to_dict()
    assert data["cause"] == "timeout"
    assert RelevancyReport.from_dict(data).cause is Cause.TIMEOUT
    assert made(0.5).to_dict()["cause"] is None


def test_given_readings_are_kept_and_empty_ones_worked_out() -> None:
    given = made(0.9, 0.8, reason="given", question_language="de", score_stderr=0.25)
    assert (given.reason, given.question_language, given.score_stderr) == ("given", "de", 0.25)
    worked = made(0.9, 0.7, score_stderr=None)
    assert worked.score_stderr == pytest.approx(0.1)
    assert made(0.9, 0.7).score_stderr == pytest.approx(0.1)
    assert made(0.9, 0.7, question_language="").question_language == "en"


def test_to_dict_and_from_dict_keep_every_number() -> None:
    report = made(
        0.9,
        math.nan,
        probe_similarity=math.inf,
        usage=Usage(judge_requests=1),
        reason="r",
        score=0.5,
        score_stderr=0.125,
    )
    data = report.to_dict()
    assert data["score"] == 0.5 and data["score_stderr"] == 0.125
    assert data["probe_similarity"] is None
    assert [p["cosine"] for p in data["probes"]] == [0.9, None]
    assert made(0.5, probe_similarity=0.25).to_dict()["probe_similarity"] == 0.25
    back = RelevancyReport.from_dict(json.loads(json.dumps(data)))
    assert back.probes[0] == Probe("Probe 0?", 0, 0.9, None)
    assert math.isnan(back.probes[1].cosine)
    assert back.usage == Usage(judge_requests=1)
    assert back.score == 0.5 and back.score_stderr == 0.125
    nan = RelevancyReport.from_dict({**data, "score": None, "probes": [], "usage": None})
    assert math.isnan(nan.score) and nan.usage is None and nan.probes == []
    minimal = {k: data[k] for k in ("user_input", "response", "strictness", "probe_prompt")}
    bare = RelevancyReport.from_dict({**minimal, "score": 1, "all_noncommittal": False})
    assert bare.probes == [] and bare.score == 1.0 and isinstance(bare.score, float)
    flagged = RelevancyReport.from_dict(
        {**data, "probes": [{"question": "Q?", "noncommittal": True, "cosine": 1}]}
    )
    assert flagged.probes == [Probe("Q?", 1, 1.0, None)]
    assert isinstance(flagged.probes[0].noncommittal, int)
    assert type(flagged.probes[0].noncommittal) is int


def test_a_probe_language_given_empty_is_detected() -> None:
    assert Probe("Where is my parcel?", 0, 0.5, "").language == "en"
    assert Probe("x", 0, 0.5, "ja").language == "ja"
    assert Probe("x", 0, 0.5).language is None


@pytest.mark.parametrize(
    ("probe", "question", "tag"),
    [
        ("en", "ja", " [English]"),
        ("xx", "ja", " [xx]"),
        ("ja", "ja", ""),
        (None, "ja", ""),
        ("en", None, ""),
    ],
)
def test_language_tag(probe: str | None, question: str | None, tag: str) -> None:
    assert language_tag(probe, question) == tag


def test_the_text_table_tags_probes_in_another_language_and_shows_usage() -> None:
    report = RelevancyReport(
        "Q?",
        "A.",
        0.5,
        2,
        "angles",
        False,
        [Probe("Wo?", 0, 0.5, "de"), Probe("Where?", 0, 0.5, "en")],
        judge_calls=2,
        distinct_probes=2,
        notes=["bell\x07"],
        question_language="en",
        reason="why\x1b[2J",
        usage=Usage(judge_requests=2),
    )
    lines = format_report(report).splitlines()
    assert lines[3] == "  0.5000   0  Wo? [German]"
    assert lines[4] == "  0.5000   0  Where?"
    assert lines[6] == "note: bell<U+0007>"
    assert lines[7].startswith("usage: judge 2 request(s), ")
    assert lines[8] == "reason: why<U+001B>[2J"
    assert len(lines) == 9


def test_the_text_table_clips_the_question_and_probes_to_300() -> None:
    long = "w" * 400
    report = made(0.5, user_input=long, probes=[Probe(long, 0, 0.5, None)])
    lines = format_report(report).splitlines()
    assert lines[0] == "question: " + "w" * 299 + "…"
    assert lines[3] == "  0.5000   0  " + "w" * 299 + "…"
    assert (
        format_report(made(0.5, user_input="w" * 300)).splitlines()[0] == "question: " + "w" * 300
    )


def test_neutralise_controls_one_line_and_boundaries() -> None:
    text = "a\tb\nc\x00\x08\x0b\x1f\x7f\x9f\xa0\u061c\u200e\u200f\u202a\u2069\u206a"
    assert neutralise_controls(text) == (
        "a\tb\nc<U+0000><U+0008><U+000B><U+001F><U+007F><U+009F>\xa0<U+061C><U+200E><U+200F>"
        "<U+202A><U+2069>\u206a"
    )
    assert neutralise_controls("a\tb\nc", one_line=True) == "a<U+0009>b<U+000A>c"
    assert neutralise_controls("a\tb\nc") == "a\tb\nc"
    assert neutralise_controls("\u202b\u202d\u2067") == "<U+202B><U+202D><U+2067>"


def test_fmt_of_none_and_infinities() -> None:
    assert [fmt(None), fmt(math.inf), fmt(-math.inf), fmt(0.5, 1)] == ["NaN", "NaN", "NaN", "0.5"]


def test_plural_uses_the_given_plural_only_for_many() -> None:
    assert plural(1, "reply", "replies") == "1 reply"
    assert plural(0, "reply", "replies") == "0 replies"


def test_pull_downs_need_two_finite_cosines() -> None:
    assert pull_downs(made(0.9, math.nan, 0.1)) == []
    assert pull_downs(made(0.9, -math.inf)) == []
    ((probe, pull),) = pull_downs(made(0.9, 0.1))
    assert probe.question == "Probe 1?" and pull == pytest.approx(0.4)
    # exactly DRIFT_GAP below the best is not drifted
    assert pull_downs(made(1.0, 0.85, 0.85)) == []
    assert [p.question for p, _ in pull_downs(made(1.0, 0.84, 0.84))] == ["Probe 1?", "Probe 2?"]


def test_a_score_at_the_low_mark_is_not_low() -> None:
    at = made(0.5, 0.5, 0.5)
    assert weak_point(at) == "no probe stands out"
    assert "Next:" not in at.reason
    assert weak_point(made(0.49, 0.49, 0.49)) == "every probe far from the question"


def test_a_score_of_zero_with_probes_reads_score_0() -> None:
    zero = made(0.0, 0.0)
    assert zero.reason.startswith("Score 0.00 is the average similarity")
    none = made(score=0.0)
    assert none.reason.startswith("Score 0: the judge wrote no usable probe question in 1 call")
    low = made(score=0.004)
    assert low.reason.startswith("Score 0.00: the judge wrote no usable probe question")


def test_a_nan_probe_with_a_finite_score_is_reported_as_not_a_number() -> None:
    report = made(0.5, math.nan, score=0.5)
    assert report.reason.startswith(
        "Score 0.50: a similarity came out as 0.5, not a number, so the score means nothing."
    )


def test_weak_point_of_a_failed_row_clips_its_error_or_reason() -> None:
    long = "E: " + "x" * 100
    assert weak_point(made(score=math.nan, error=long)) == "not scored: " + long[:89] + "…"
    no_error = made(score=math.nan, judge_calls=2)
    assert weak_point(no_error) == "not scored: " + no_error.reason[:89] + "…"
    assert weak_point(made(0.9, 0.1)).startswith("“Probe 1?” (0.10) pulled it down by 0.40")


def test_weak_point_clips_the_probe_to_70() -> None:
    long = "q" * 80
    report = made(0.9, 0.1, probes=[Probe("a?", 0, 0.9, None), Probe(long, 0, 0.1, None)])
    assert weak_point(report) == f"“{'q' * 69}…” (0.10) pulled it down by 0.40"
