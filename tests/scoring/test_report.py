"""The reason sentence and the text table, word for word, for every case a person meets."""

from __future__ import annotations

import math
from functools import partial

import pytest

from ragas_relevancy_ext.scoring.report import (
    Probe,
    RelevancyReport,
    clip,
    format_report,
    neutralise_controls,
    plural,
    pull_downs,
    weak_point,
)


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


def test_plural_and_bidi():
    assert [plural(0, "call"), plural(1, "call"), plural(2, "call")] == [
        "0 calls",
        "1 call",
        "2 calls",
    ]
    assert plural(2, "reply", "replies") == "2 replies"
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
