"""The reason sentence and the text table, word for word, for every case a person meets: scored,
not scored (for each cause), set aside, and probes in another language."""

from __future__ import annotations

import math
from functools import partial

import pytest

from ragas_relevancy_ext.errors import Cause
from ragas_relevancy_ext.scoring.report import (
    Probe,
    RelevancyReport,
    clip,
    explain,
    format_report,
    language_tag,
    neutralise_controls,
    not_scored_cause,
    not_scored_reason,
    plural,
    pull_downs,
    weak_point,
)
from ragas_relevancy_ext.scoring.usage import Usage


def report(*cosines: float, flags: list[int] | None = None, **changes) -> RelevancyReport:
    """A report on probes "Probe 0?", "Probe 1?"... with these cosines; score as stock computes."""
    flags = flags or [0] * len(cosines)
    probes = [
        Probe(f"Probe {i}?", f, c) for i, (c, f) in enumerate(zip(cosines, flags, strict=True))
    ]
    nc = bool(cosines) and all(flags)
    score = 0.0 if nc or not cosines else sum(cosines) / len(cosines)
    values = dict(
        user_input="Where is order A17?",
        response="Order A17 shipped on 3 March.",
        score=score,
        strictness=len(cosines) or 3,
        probe_prompt="diverse",
        all_noncommittal=nc,
        probes=probes,
        judge_calls=1,
        distinct_probes=len(cosines),
    )
    values.update(changes)
    return RelevancyReport(**values)


CLOSE = (
    "Score 0.85 is the average similarity (1 = same meaning) between the question and 3 "
    "questions the judge wrote from the answer (the probes). All 3 probes are within 0.15 of the "
    "closest one (0.90), so no single probe pulled the score down."
)
NEXT_DRIFT = (
    " Next: read the part of the answer behind the lowest probe; it may answer something the "
    "user did not ask."
)
NOTHING = (
    "the judge wrote no usable probe question in {calls}, so there was nothing to compare with "
    "the question. Next: read the judge's replies in the notes; a judge that cannot follow the "
    "probe prompt may do better with another one."
)
DODGES = (
    "Score 0: the judge flagged {which} as noncommittal, which means the answer dodges the "
    'question ("I don\'t know", "it depends"), and that rule sets the score to 0 whatever the '
    "similarities. Next: read the answer and check whether it answers."
)


@pytest.mark.parametrize(
    ("made", "reason"),
    [
        (partial(report, 0.9, 0.85, 0.8), CLOSE),
        (
            partial(report, 0.9, 0.3, 0.85),
            "Score 0.68 is the average similarity (1 = same meaning) between the question and 3 "
            'questions the judge wrote from the answer (the probes). The probe "Probe 1?" '
            "(similarity 0.30) pulled it down by 0.19." + NEXT_DRIFT,
        ),
        (
            partial(report, 0.9, 0.3, 0.2),
            "Score 0.47 is the average similarity (1 = same meaning) between the question and 3 "
            "questions the judge wrote from the answer (the probes). Two probes pulled it down: "
            '"Probe 2?" (0.20) by 0.13 and "Probe 1?" (0.30) by 0.08.' + NEXT_DRIFT,
        ),
        (
            partial(report, 0.9, 0.3, 0.2, 0.1),
            "Score 0.38 is the average similarity (1 = same meaning) between the question and 4 "
            "questions the judge wrote from the answer (the probes). 3 probes pulled it down: "
            '"Probe 3?" (0.10) by 0.09, "Probe 2?" (0.20) by 0.06 and 1 more.' + NEXT_DRIFT,
        ),
        (
            partial(report, 0.9, 0.8),
            "Score 0.85 is the average similarity (1 = same meaning) between the question and 2 "
            "questions the judge wrote from the answer (the probes). Both probes are within 0.15 "
            "of the closest one (0.90), so no single probe pulled the score down.",
        ),
        (
            partial(report, 0.7),
            "Score 0.70 is the similarity (1 = same meaning) between the question and the one "
            'question the judge wrote from the answer: "Probe 0?". A higher strictness (more '
            "probes) gives a steadier score.",
        ),
        (
            partial(report, 0.7, strictness=3),
            "Score 0.70 is the similarity (1 = same meaning) between the question and the one "
            'question the judge wrote from the answer: "Probe 0?". Only 1 of the 3 probes asked '
            "for was usable; the notes say why.",
        ),
        (
            partial(report, 0.9, 0.8, strictness=3),
            "Score 0.85 is the average similarity (1 = same meaning) between the question and 2 "
            "questions the judge wrote from the answer (the probes). Both probes are within 0.15 "
            "of the closest one (0.90), so no single probe pulled the score down. Only 2 of the 3 "
            "probes asked for were usable; the notes say why.",
        ),
        (
            partial(report, 0.3, 0.35, 0.32),
            "Score 0.32 is the average similarity (1 = same meaning) between the question and 3 "
            "questions the judge wrote from the answer (the probes). All 3 probes are within 0.15 "
            "of the closest one (0.35), so no single probe pulled the score down. Next: every "
            "probe is far from the question, so the answer may address another question; read "
            "the two side by side.",
        ),
        (
            partial(report, 0.9, 0.8, strictness=3, duplicates_dropped=1),
            "Score 0.85 is the average similarity (1 = same meaning) between the question and 2 "
            "questions the judge wrote from the answer (the probes). Both probes are within 0.15 "
            "of the closest one (0.90), so no single probe pulled the score down. The judge "
            "repeated itself: 1 duplicate was dropped, leaving 2 distinct probes.",
        ),
        (
            partial(report, 0.9, strictness=3, duplicates_dropped=2, distinct_probes=1),
            "Score 0.90 is the similarity (1 = same meaning) between the question and the one "
            'question the judge wrote from the answer: "Probe 0?". The judge repeated itself: 2 '
            "duplicates were dropped, leaving 1 distinct probe.",
        ),
        (
            partial(report, 0.9, 0.9, 0.9, distinct_probes=1),
            "Score 0.90 is the average similarity (1 = same meaning) between the question and 3 "
            "questions the judge wrote from the answer (the probes). All 3 probes are within 0.15 "
            "of the closest one (0.90), so no single probe pulled the score down. The judge "
            "repeated itself: only 1 of the 3 probes is distinct, so the score rests on less "
            "evidence than it seems.",
        ),
        (
            partial(report, 0.9, 0.9, 0.8, distinct_probes=2),
            CLOSE.replace("0.85", "0.87")
            + " The judge repeated itself: only 2 of the 3 probes are distinct, so the score "
            "rests on less evidence than it seems.",
        ),
        (partial(report, 0.5, flags=[1]), DODGES.format(which="its only probe question")),
        (partial(report, 0.5, 0.4, flags=[1, 1]), DODGES.format(which="both probe questions")),
        (
            partial(report, 0.5, 0.4, 0.2, flags=[1, 1, 1]),
            DODGES.format(which="all 3 probe questions"),
        ),
        (partial(report, judge_calls=1), "Score 0: " + NOTHING.format(calls="1 call")),
        (
            partial(report, judge_calls=3, score=math.nan),
            "Not scored: " + NOTHING.format(calls="3 calls"),
        ),
        (
            partial(report, 0.9, 0.8, score=math.nan),
            "Not scored: a similarity came out as nan, not a number, so the score means nothing. "
            "Next: check the embeddings' vectors for this row (infinite, tiny or wrong-sized "
            "values).",
        ),
        (
            partial(report, error="TimeoutError: judge took too long"),
            "Not scored: TimeoutError: judge took too long",
        ),
    ],
)
def test_reason_sentences_word_for_word(made, reason):
    # built here, not at import: a reason is worked out once per report and then kept, so a
    # report shared with an earlier run in the same process would not show a change
    assert made().reason == reason


def test_a_long_probe_is_quoted_clipped():
    long = "Why " + "very " * 40 + "long?"
    made = RelevancyReport(
        "Q?",
        "A.",
        0.55,
        2,
        "diverse",
        False,
        [Probe("Near?", 0, 0.9), Probe(long, 0, 0.2)],
        distinct_probes=2,
    )
    quoted = made.reason.split('"')[1]
    assert len(quoted) == 80 and quoted.endswith("…")


def test_pull_downs_are_leave_one_out_lowest_first():
    made = report(0.9, 0.3, 0.2)
    pulls = pull_downs(made)
    assert [p.question for p, _ in pulls] == ["Probe 2?", "Probe 1?"]
    assert pulls[0][1] == pytest.approx((0.9 + 0.3) / 2 - (0.9 + 0.3 + 0.2) / 3)
    # 0.82 sits over 0.15 below the best but above the mean: leaving it out would lower the score
    assert [p.question for p, _ in pull_downs(report(1.0, 0.82, 0.4))] == ["Probe 2?"]
    assert pull_downs(report(0.9)) == []
    assert pull_downs(report(0.9, 0.1, flags=[1, 1])) == []
    assert pull_downs(report(0.9, math.nan, 0.1)) == []  # a cosine not measured: none
    assert pull_downs(report(0.9, -math.inf)) == []
    # exactly 0.15 below the best is not drifted; just over it is
    assert pull_downs(report(1.0, 0.85, 0.85)) == []
    assert [p.question for p, _ in pull_downs(report(1.0, 0.84, 0.84))] == ["Probe 1?", "Probe 2?"]


def test_plural_and_bidi():
    assert [plural(0, "call"), plural(1, "call"), plural(2, "call")] == [
        "0 calls",
        "1 call",
        "2 calls",
    ]
    assert plural(2, "reply", "replies") == "2 replies"
    assert plural(1, "reply", "replies") == "1 reply"
    assert plural(0, "reply", "replies") == "0 replies"
    text = "abc\u202edcba\u2066x\u2069"
    assert neutralise_controls(text) == "abc<U+202E>dcba<U+2066>x<U+2069>"
    assert clip(text, 100) == "abc<U+202E>dcba<U+2066>x<U+2069>"


def test_the_text_table_word_for_word():
    made = report(0.9, 0.3, 0.85, flags=[0, 1, 0], probe_similarity=0.4567, judge_calls=2)
    made.notes.append("reply 2 was not valid JSON; asked again")
    assert format_report(made) == "\n".join(
        [
            "question: Where is order A17?",
            "response: Order A17 shipped on 3 March.",
            "  cosine  nc  probe",
            "  0.9000   0  Probe 0?",
            "  0.3000   1  Probe 1?",
            "  0.8500   0  Probe 2?",
            "score 0.6833 | prompt diverse | judge calls 2 | distinct 3/3 | probe similarity 0.457",
            "note: reply 2 was not valid JSON; asked again",
            f"reason: {made.reason}",
        ]
    )
    nan = report(error="boom", score=math.nan)
    assert format_report(nan).splitlines()[3] == (
        "score NaN | prompt diverse | judge calls 1 | distinct 0/3 | probe similarity -"
    )


def test_report_lines_with_keys_this_version_does_not_know_still_load():
    data = report(0.9, 0.8).to_dict()
    data["row_written_by_a_newer_version"] = 1
    assert RelevancyReport.from_dict(data) == RelevancyReport.from_dict(report(0.9, 0.8).to_dict())


def test_weak_point_names_what_pulled_a_row_down():
    assert weak_point(report(0.9, 0.3, 0.85)) == "“Probe 1?” (0.30) pulled it down by 0.19"
    assert weak_point(report(0.5, 0.4, flags=[1, 1])) == "every probe flagged noncommittal"
    assert weak_point(report(0.3, 0.35, 0.32)) == "every probe far from the question"
    assert weak_point(report(0.9, 0.85, 0.8)) == "no probe stands out"
    assert weak_point(report(judge_calls=2)) == "no usable probe"
    assert weak_point(report(error="boom", score=math.nan)) == "not scored: boom"


def test_neutralise_controls_one_line_and_boundaries():
    text = "a\tb\nc\x00\x08\x0b\x1f\x7f\x9f\xa0\u061c\u200e\u200f\u202a\u2069\u206a"
    assert neutralise_controls(text) == (
        "a\tb\nc<U+0000><U+0008><U+000B><U+001F><U+007F><U+009F>\xa0<U+061C><U+200E><U+200F>"
        "<U+202A><U+2069>\u206a"
    )
    assert neutralise_controls("a\tb\nc", one_line=True) == "a<U+0009>b<U+000A>c"
    assert neutralise_controls("\u202b\u202d\u2067") == "<U+202B><U+202D><U+2067>"


def test_the_text_table_tags_probes_in_another_language_and_shows_usage():
    made = RelevancyReport(
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
    lines = format_report(made).splitlines()
    assert lines[3] == "  0.5000   0  Wo? [German]"
    assert lines[4] == "  0.5000   0  Where?"
    assert lines[6] == "note: bell<U+0007>"
    assert lines[7].startswith("usage: judge 2 request(s), ")
    assert lines[8] == "reason: why<U+001B>[2J"
    assert len(lines) == 9


def test_the_text_table_clips_the_question_and_probes_to_300():
    long = "w" * 400
    lines = format_report(report(0.5, user_input=long, probes=[Probe(long, 0, 0.5)])).splitlines()
    assert lines[0] == "question: " + "w" * 299 + "…"
    assert lines[3] == "  0.5000   0  " + "w" * 299 + "…"
    assert format_report(report(0.5, user_input="w" * 300)).splitlines()[0] == (
        "question: " + "w" * 300
    )


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
def test_language_tag(probe, question, tag):
    assert language_tag(probe, question) == tag


# -- rows not scored ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cause", "error", "embeddings", "text"),
    [
        (Cause.AUTH, "401", False, "Not scored (auth): the judge refused the API key: 401"),
        (Cause.AUTH, "401", True, "Not scored (auth): the embeddings refused the API key: 401"),
        ("auth", "401", False, "Not scored (auth): the judge refused the API key: 401"),
        ("from_the_future", "x", False, "Not scored (from_the_future): x"),
    ],
)
def test_not_scored_reason(cause, error, embeddings, text):
    assert not_scored_reason(cause, error, embeddings) == text
    if not embeddings:  # the judge's, unless said otherwise
        assert not_scored_reason(cause, error) == text


def test_a_failed_reports_reason_names_judge_or_embeddings():
    judge = report(score=math.nan, error="RateLimitError: 429", cause=Cause.RATE_LIMITED)
    assert judge.reason == (
        "Not scored (rate_limited): the judge answered rate limited (429): RateLimitError: 429"
    )
    for kind in ("EmbeddingCallError", "EmbeddingShapeError"):
        failed = report(score=math.nan, error=f"{kind}: bad", cause="embeddings_error")
        assert failed.cause is Cause.EMBEDDINGS_ERROR
        assert explain(failed).startswith("Not scored (embeddings_error): ")
        assert failed.reason.endswith(f": {kind}: bad")
        timeout = report(score=math.nan, error=f"{kind}: t", cause=Cause.TIMEOUT)
        assert timeout.reason == (
            f"Not scored (timeout): the embeddings did not answer in time: {kind}: t"
        )
    skipped = report(score=math.nan, error="skipped: no response", cause=Cause.BAD_INPUT)
    assert skipped.reason == "Not scored: skipped: no response"


def test_not_scored_cause_in_one_word():
    assert not_scored_cause(report(score=math.nan, error="skipped: empty row")) == "skipped"
    skipped_with_cause = report(score=math.nan, error="skipped: x", cause=Cause.BAD_INPUT)
    assert not_scored_cause(skipped_with_cause) == "skipped"
    assert not_scored_cause(report(score=math.nan, error="E: x", cause=Cause.AUTH)) == "auth"
    assert not_scored_cause(report(score=math.nan, error="ValueError: a: b")) == "ValueError"
    assert not_scored_cause(report(score=math.nan)) == "no_usable_probe"
    assert not_scored_cause(report(0.5, score=math.nan)) == "no_usable_probe"


# -- scores at the edges -----------------------------------------------------------------------


def test_a_score_at_the_low_mark_is_not_low():
    at = report(0.5, 0.5, 0.5)
    assert weak_point(at) == "no probe stands out"
    assert "Next:" not in at.reason
    assert weak_point(report(0.49, 0.49, 0.49)) == "every probe far from the question"


def test_a_score_of_zero_with_probes_reads_score_0():
    assert report(0.0, 0.0).reason.startswith("Score 0.00 is the average similarity")
    assert report().reason.startswith("Score 0: the judge wrote no usable probe question in 1 call")
    low = report(score=0.004)
    assert low.reason.startswith("Score 0.00: the judge wrote no usable probe question")


def test_a_nan_probe_with_a_finite_score_is_reported_as_not_a_number():
    assert report(0.5, math.nan, score=0.5).reason.startswith(
        "Score 0.50: a similarity came out as 0.5, not a number, so the score means nothing."
    )


def test_weak_point_of_a_failed_row_clips_its_error_or_reason():
    long = "E: " + "x" * 100
    assert weak_point(report(score=math.nan, error=long)) == "not scored: " + long[:89] + "…"
    no_error = report(score=math.nan, judge_calls=2)
    assert weak_point(no_error) == "not scored: " + no_error.reason[:89] + "…"
    assert weak_point(report(0.9, 0.1)).startswith("“Probe 1?” (0.10) pulled it down by 0.40")


def test_weak_point_clips_the_probe_to_70():
    long = "q" * 80
    made = report(0.9, 0.1, probes=[Probe("a?", 0, 0.9), Probe(long, 0, 0.1)])
    assert weak_point(made) == f"“{'q' * 69}…” (0.10) pulled it down by 0.40"
