"""The angles probe mode: N concurrent one-probe calls, each worded from another angle."""

from __future__ import annotations

import pytest

from ragas_relevancy_ext import AnswerRelevancy
from ragas_relevancy_ext.scoring.probe_modes import MAX_EXTRA_CALLS, MODES
from ragas_relevancy_ext.scoring.prompts import (
    ANGLES,
    AngleProbeInput,
    AngleProbePrompt,
    AnswerRelevanceInput,
    AnswerRelevancePrompt,
)
from ragas_relevancy_ext.testing.offline import (
    HashEmbeddings,
    PretendJudge,
    SamePromptJudge,
    ScriptedJudge,
    prompt_input,
)

Q = "Where is order A17 now?"
A = "Order A17 left the Leeds warehouse on 3 March and arrives on Friday."
P1 = "Where is order A17 now?"
P2 = "When does order A17 arrive?"
P3 = "What is the status of my order A17?"


def score(judge, strictness=3, mode="angles", **options):
    metric = AnswerRelevancy(
        judge, HashEmbeddings(64), strictness=strictness, probe_prompt=mode, **options
    )
    return metric.score(user_input=Q, response=A)


def angles_sent(judge) -> list[str]:
    return [prompt_input(p)["angle"] for p in judge.prompts]


def test_the_mode_is_registered_with_its_prompt():
    assert MODES["angles"].prompt_class() is AngleProbePrompt


@pytest.mark.parametrize("strictness", [1, 3, 10])
def test_n_calls_go_out_at_once_each_from_another_angle(strictness):
    replies = [(f"Question number {i} about returns?", 0) for i in range(strictness)]
    judge = ScriptedJudge(replies, latency=0.01)
    report = score(judge, strictness).report
    assert judge.calls == report.judge_calls == strictness
    assert judge.peak == strictness  # every call in flight before any answered
    assert [p.question for p in report.probes] == [q for q, _ in replies]
    assert angles_sent(judge) == list(ANGLES[:strictness])
    assert [prompt_input(p) for p in judge.prompts] == [
        {"response": A, "angle": angle} for angle in ANGLES[:strictness]
    ]


def test_max_concurrency_caps_the_calls_in_flight():
    judge = ScriptedJudge([(f"Q{i}?", 0) for i in range(6)], latency=0.01)
    score(judge, 6, max_concurrency=2)
    assert judge.calls == 6 and judge.peak == 2


def test_angles_are_distinct_past_the_list():
    prompt = AngleProbePrompt()
    angles = [prompt.angle(i) for i in range(3 * len(ANGLES))]
    assert len(set(angles)) == len(angles)
    assert angles[len(ANGLES)].startswith(ANGLES[0]) and "wording 2" in angles[len(ANGLES)]


@pytest.mark.parametrize("strictness", [3, 10])
def test_a_judge_that_repeats_itself_per_prompt_still_gives_distinct_probes(strictness, cases):
    for case in cases:
        stock_judge, angles_judge = SamePromptJudge(), SamePromptJudge()
        inputs = {"user_input": case["user_input"], "response": case["response"]}
        stock = AnswerRelevancy(
            stock_judge, HashEmbeddings(64), strictness=strictness, probe_prompt="stock"
        ).score(**inputs)
        ours = AnswerRelevancy(
            angles_judge, HashEmbeddings(64), strictness=strictness, probe_prompt="angles"
        ).score(**inputs)
        # the same prompt N times collapses into copies of one question...
        assert stock.report.distinct_probes == 1 and stock_judge.calls == strictness
        # ...N prompts that differ by angle do not, and need no re-asking
        assert ours.report.distinct_probes == len(ours.report.probes) == strictness
        assert angles_judge.calls == strictness and ours.report.duplicates_dropped == 0


def test_duplicates_are_dropped_and_re_asked_from_fresh_angles_avoiding_the_kept():
    judge = ScriptedJudge([(P1, 0), (P1.upper(), 0), (P2, 0), (P3, 0)], latency=0.01)
    report = score(judge).report
    assert [p.question for p in report.probes] == [P1, P2, P3]
    assert report.duplicates_dropped == 1 and judge.calls == report.judge_calls == 4
    assert prompt_input(judge.prompts[3]) == {"response": A, "angle": ANGLES[3], "avoid": [P1, P2]}


def test_re_asks_run_at_once_and_stop_after_the_extra_calls():
    judge = ScriptedJudge([(P1, 0)] * 8, latency=0.01)
    result = score(judge)
    assert judge.calls == 3 + MAX_EXTRA_CALLS
    assert judge.peak == 3  # the first round; the re-asks (2) went out together
    assert angles_sent(judge) == list(ANGLES[:5])
    assert [p.question for p in result.report.probes] == [P1]
    assert "kept 1 of 3 probes after 5 judge call(s)" in result.report.notes
    assert judge.remaining == 3


def test_re_asks_beyond_the_first_round_share_the_extra_calls():
    # 3 asked, 2 duplicates -> 2 re-asked, 1 duplicate again -> 0 calls left
    replies = [(P1, 0), (P1, 0), (P1, 0), (P2, 0), (P1, 0), (P3, 0)]
    report = score(ScriptedJudge(replies)).report
    assert [p.question for p in report.probes] == [P1, P2]
    assert report.judge_calls == 5 and report.duplicates_dropped == 3


def test_a_malformed_reply_is_noted_and_re_asked():
    judge = ScriptedJudge([(P1, 0), "not JSON", (P2, 0), (P3, 0)])
    report = score(judge).report
    assert [p.question for p in report.probes] == [P1, P2, P3]
    assert report.judge_calls == 4
    assert report.notes[0].startswith("call 2: reply did not parse")


def test_transport_errors_are_not_swallowed():
    judge = ScriptedJudge([(P1, 0), ConnectionError("connection refused"), (P2, 0)])
    with pytest.raises(ConnectionError, match="refused"):
        score(judge)


def test_noncommittal_rule_holds():
    assert score(ScriptedJudge([(P1, 1), (P2, 1), (P3, 1)])).value == 0.0
    assert score(ScriptedJudge([(P1, 1), (P2, 0), (P3, 1)])).value > 0


def test_an_evasive_answer_is_flagged_from_every_angle():
    judge = PretendJudge()
    result = AnswerRelevancy(judge, HashEmbeddings(64), strictness=5, probe_prompt="angles").score(
        user_input=Q, response="Sorry, I don't know where order A17 is."
    )
    assert judge.calls == 5 and result.report.distinct_probes == 5
    assert [p.noncommittal for p in result.report.probes] == [1] * 5
    assert result.value == 0.0 and result.report.all_noncommittal


def test_every_angle_prompt_keeps_the_whole_question_and_noncommittal_rules():
    judge = PretendJudge()
    score(judge, strictness=12)
    assert judge.calls >= 12
    for text in judge.prompts:
        assert "Guess the WHOLE question" in text and "not one detail of it" in text
        assert "changes the wording only" in text
        assert (
            'noncommittal is 1 if the answer is evasive, vague or ambiguous ("I don\'t know"'
            in (text)
        )
    examples = AngleProbePrompt().examples
    assert {wanted.noncommittal for _, wanted in examples} == {0, 1}
    assert any(given.avoid for given, _ in examples)


def test_one_angle_prompt_is_well_under_one_stock_prompt():
    stock = AnswerRelevancePrompt().to_string(AnswerRelevanceInput(response=A))
    ours = AngleProbePrompt().to_string(AngleProbeInput(response=A, angle=ANGLES[0]))
    assert len(ours) < 0.6 * len(stock)
    # every call of a sample (and of every sample) shares all but the input line
    prefix = ours[: ours.rindex("\ninput: ")]
    assert (
        AngleProbePrompt()
        .to_string(AngleProbeInput(response="Other.", angle=ANGLES[5]))
        .startswith(prefix)
    )


def test_a_users_prompt_object_brings_its_own_angles():
    class TwoAngles(AngleProbePrompt):
        angles = ("as a child asks", "as a lawyer asks")

    judge = ScriptedJudge([(P1, 0), (P2, 0), (P3, 0)])
    report = (
        AnswerRelevancy(judge, HashEmbeddings(), probe_prompt=TwoAngles())
        .score(user_input=Q, response=A)
        .report
    )
    assert report.probe_prompt == "TwoAngles"
    assert angles_sent(judge) == [
        "as a child asks",
        "as a lawyer asks",
        "as a child asks (wording 2)",
    ]


def test_the_text_sent_for_an_angle_is_the_whole_prompt_byte_for_byte():
    judge = ScriptedJudge([(P1, 0)])
    score(judge, strictness=1)
    (sent,) = judge.prompts
    assert sent == (
        "Guess the WHOLE question the given answer replies to, not one detail of it, and word "
        "it from the given angle: the angle changes the wording only. Never write a question "
        "listed in avoid. Write it in the language of the answer.\n"
        'noncommittal is 1 if the answer is evasive, vague or ambiguous ("I don\'t know", '
        '"I\'m not sure", "It depends"), else 0.\n'
        'Reply with one JSON object only: {"question": string, "noncommittal": 0 or 1}.\n'
        "\n"
        'Example input: {"response":"Paris is the capital of France, known for its museums.",'
        '"angle":"short: the fewest words that still ask all of it"}\n'
        'Example output: {"question":"France\'s capital?","noncommittal":0}\n'
        'Example input: {"response":"I\'m not sure when the store opens.","angle":"formal: as '
        'written to customer support","avoid":["When does the store open?"]}\n'
        'Example output: {"question":"Could you tell me your opening hours?","noncommittal":1}\n'
        "\n"
        f'input: {{"response":"{A}","angle":"plain: as the asker most likely typed it"}}\n'
        "Output: "
    )
