"""Probe modes (stock, sequential, diverse) and every malformed judge reply, scripted."""

from __future__ import annotations

import copy
import json
import math

import pytest

from ragas_relevancy_ext import AnswerRelevancy, DiverseProbePrompt, SequentialProbePrompt
from ragas_relevancy_ext.errors import JudgeReplyError
from ragas_relevancy_ext.scoring.probe_modes import MAX_EXTRA_CALLS
from ragas_relevancy_ext.scoring.prompts import AnswerRelevancePrompt
from ragas_relevancy_ext.testing.offline import (
    HashEmbeddings,
    PretendJudge,
    ScriptedJudge,
    prompt_input,
)

Q = "What is TechNest's return policy?"
A = "Returns are accepted within 30 days in the original packaging."
P1 = "What is TechNest's return policy?"
P2 = "How do returns work at TechNest?"
P3 = "Under what conditions can I return an item to TechNest?"
P4 = "What are TechNest's rules for returning a purchase?"


class CountingEmbeddings(HashEmbeddings):
    def __init__(self):
        super().__init__(64)
        self.batches: list[list[str]] = []

    async def aembed_texts(self, texts, **kwargs):
        self.batches.append(list(texts))
        return [self.embed_text(t) for t in texts]


def run(replies, mode="diverse", strictness=3, embeddings=None):
    judge = ScriptedJudge(replies)
    metric = AnswerRelevancy(
        judge, embeddings or HashEmbeddings(64), strictness=strictness, probe_prompt=mode
    )
    return metric.score(user_input=Q, response=A), judge


def test_diverse_is_the_default_and_makes_one_call_for_n_probes():
    embeddings = CountingEmbeddings()
    judge = ScriptedJudge([[(P1, 0), (P2, 0), (P3, 0)]])
    result = AnswerRelevancy(judge, embeddings).score(user_input=Q, response=A)
    report = result.report
    assert report.probe_prompt == "diverse"
    assert judge.calls == report.judge_calls == 1
    assert [p.question for p in report.probes] == [P1, P2, P3]
    assert (report.distinct_probes, report.duplicates_dropped) == (3, 0)
    # question and probes embedded once each; probe similarity comes from those same vectors
    assert embeddings.batches == [[Q], [P1, P2, P3]]
    assert report.probe_similarity is not None and -1.0 <= report.probe_similarity <= 1.0
    assert prompt_input(judge.prompts[0]) == {"response": A, "n": 3}


def test_diverse_duplicates_are_dropped_and_the_missing_asked_again():
    replies = [
        [(P1, 0), ("what is technest's RETURN policy", 0), (P1 + "  ", 0)],
        [(P2, 0), (P3, 0)],
    ]
    result, judge = run(replies)
    report = result.report
    assert [p.question for p in report.probes] == [P1, P2, P3]
    assert report.duplicates_dropped == 2 and report.judge_calls == 2
    second = prompt_input(judge.prompts[1])
    assert second == {"response": A, "n": 2, "avoid": [P1]}
    assert "repeated itself: 2 duplicates were dropped, leaving 3 distinct probes" in result.reason


def test_at_most_two_extra_calls_then_scores_what_it_has():
    replies = [[(P1, 0)] * 3, [(P1, 0)], [(P1, 0)], [(P2, 0)]]
    result, judge = run(replies)
    assert judge.calls == 1 + MAX_EXTRA_CALLS == 3
    assert [p.question for p in result.report.probes] == [P1]
    assert result.value == pytest.approx(result.report.probes[0].cosine)
    assert any("kept 1 of 3 probes after 3 judge call(s)" in n for n in result.report.notes)
    assert judge.remaining == 1


def test_fewer_items_than_asked_are_topped_up():
    result, judge = run([[(P1, 0)], [(P2, 0), (P3, 0)]])
    assert [p.question for p in result.report.probes] == [P1, P2, P3]
    assert judge.calls == 2
    assert "call 1: asked for 3 probe(s), got 1" in result.report.notes


def test_more_items_than_asked_keep_the_first_distinct_ones():
    result, judge = run([[(P1, 0), (P1, 0), (P2, 0), (P3, 0), (P4, 0)]])
    assert [p.question for p in result.report.probes] == [P1, P2, P3]
    assert judge.calls == 1
    notes = result.report.notes
    assert "call 1: asked for 3 probe(s), got 5" in notes
    assert "call 1: ignored 1 probe(s) beyond 3" in notes


def test_empty_questions_are_dropped_and_replaced():
    result, judge = run([[(P1, 0), ("", 0), ("   ", 0)], [(P2, 0), (P3, 0)]])
    assert [p.question for p in result.report.probes] == [P1, P2, P3]
    assert result.report.notes.count("call 1: dropped an empty question") == 2


@pytest.mark.parametrize("flag", [2, -1, 7])
def test_flags_other_than_0_or_1_are_dropped_and_noted(flag):
    result, judge = run([[(P1, 0), (P2, flag), (P3, 0)], [(P4, 0)]])
    assert [p.question for p in result.report.probes] == [P1, P3, P4]
    assert any(f"noncommittal={flag} is not 0 or 1" in n for n in result.report.notes)


@pytest.mark.parametrize(
    "bad",
    [
        "this is not JSON",
        '{"probes": "not a list"}',
        '{"questions": []}',
        '{"probes": [{"question": "Q?"}]}',
        '{"probes": [{"question": "Q?", "noncommittal": "maybe"}]}',
    ],
)
def test_a_reply_that_does_not_parse_is_noted_and_asked_again(bad):
    result, judge = run([bad, [(P1, 0), (P2, 0), (P3, 0)]])
    assert [p.question for p in result.report.probes] == [P1, P2, P3]
    assert judge.calls == result.report.judge_calls == 2
    assert result.report.notes[0].startswith("call 1: reply did not parse (ValidationError")


def test_nothing_usable_in_any_call_is_not_measured_and_says_why():
    result, judge = run(["garbage", "{}", '{"probes": []}'])
    assert math.isnan(result.value) and result.report.probes == []
    assert judge.calls == 3
    assert "no usable probe" in result.reason


@pytest.mark.parametrize("mode", ["stock", "sequential", "diverse"])
def test_transport_errors_are_not_swallowed(mode):
    with pytest.raises(ConnectionError, match="refused"):
        run([(P1, 0), ConnectionError("connection refused"), (P2, 0)], mode=mode)


def test_noncommittal_rule_is_unchanged_in_diverse_mode():
    result, _ = run([[(P1, 1), (P2, 1), (P3, 1)]])
    assert result.value == 0.0 and result.report.all_noncommittal
    mixed, _ = run([[(P1, 1), (P2, 0), (P3, 1)]])
    assert mixed.value > 0
    # a dropped bad probe does not count towards "every probe flagged"
    kept_flagged, _ = run([[(P1, 1), (P2, 5), (P3, 1)], [(P4, 1)]])
    assert kept_flagged.value == 0.0


def test_sequential_shows_each_call_the_probes_so_far():
    replies = [(P1, 0), (P1.upper(), 0), (P2, 0), (P3, 0)]
    result, judge = run(replies, mode="sequential")
    assert [p.question for p in result.report.probes] == [P1, P2, P3]
    assert result.report.duplicates_dropped == 1 and judge.calls == 4
    assert [prompt_input(p).get("previous_questions") for p in judge.prompts] == [
        None,
        [P1],
        [P1],
        [P1, P2],
    ]


def test_sequential_stops_after_two_extra_calls():
    result, judge = run([(P1, 0)] * 6, mode="sequential")
    assert judge.calls == 3 + MAX_EXTRA_CALLS
    assert len(result.report.probes) == 1 and result.report.duplicates_dropped == 4


def test_sequential_survives_malformed_replies():
    replies = ["nope", (P1, 0), ("", 0), (P2, 9), (P2, 0)]
    result, judge = run(replies, mode="sequential")
    assert [p.question for p in result.report.probes] == [P1, P2]
    assert judge.calls == 5
    assert len(result.report.notes) == 4  # parse error, empty, bad flag, shortfall


def test_stock_mode_keeps_duplicates_and_never_asks_again():
    result, judge = run([(P1, 0), (P1, 0), "broken"], mode="stock")
    assert judge.calls == 3
    assert [p.question for p in result.report.probes] == [P1, P1]
    assert result.report.distinct_probes == 1 and result.report.duplicates_dropped == 0
    assert "only 1 of the 2 probes is distinct" in result.reason
    assert result.report.notes[0].startswith("call 3: reply did not parse")


def test_a_users_prompt_object_replaces_the_instruction():
    class TerseDiverse(DiverseProbePrompt):
        instruction = "Write n short questions this answer replies to. Flag evasive answers."

    judge = ScriptedJudge([[(P1, 0), (P2, 0), (P3, 0)]])
    metric = AnswerRelevancy(judge, HashEmbeddings(), probe_prompt=TerseDiverse())
    report = metric.score(user_input=Q, response=A).report
    assert judge.prompts[0].startswith("Write n short questions")
    assert report.probe_prompt == "TerseDiverse" and judge.calls == 1

    class MySequential(SequentialProbePrompt):
        examples = []

    judge = ScriptedJudge([(P1, 0), (P2, 0), (P3, 0)])
    AnswerRelevancy(judge, HashEmbeddings(), probe_prompt=MySequential()).score(
        user_input=Q, response=A
    )
    assert judge.calls == 3 and "EXAMPLES" not in judge.prompts[0]


def test_a_prompt_object_with_other_models_is_refused():
    from pydantic import BaseModel
    from ragas.prompt.metrics.base_prompt import BasePrompt

    class In(BaseModel):
        text: str

    class Other(BasePrompt):
        input_model = In
        output_model = In
        instruction = "x"
        examples = []

    with pytest.raises(TypeError, match="In/In"):
        AnswerRelevancy(PretendJudge(), HashEmbeddings(), probe_prompt=Other())


def test_stock_mode_sends_ragas_own_prompt_text():
    from ragas_relevancy_ext.scoring.prompts import AnswerRelevanceInput

    _, judge = run([(P1, 0)] * 3, mode="stock")
    assert (
        judge.prompts == [AnswerRelevancePrompt().to_string(AnswerRelevanceInput(response=A))] * 3
    )


def test_diverse_prompt_asks_for_whole_question_guesses_and_shows_examples():
    text = DiverseProbePrompt().instruction
    assert "WHOLE question" in text and "not one detail" in text
    assert len(DiverseProbePrompt().examples) >= 2
    example_probes = DiverseProbePrompt().examples[0][1].probes
    assert len({p.question for p in example_probes}) == len(example_probes)
    json.dumps(DiverseProbePrompt().output_model.model_json_schema())


@pytest.mark.parametrize("mode", ["diverse", "sequential", "stock"])
def test_a_prompt_is_rendered_by_ragas_once_and_edits_show_in_the_next_text(mode, monkeypatch):
    from ragas_relevancy_ext.scoring.probe_modes import MODES, render

    prompt = MODES[mode].prompt_class()()
    family = type(prompt).__mro__[1]
    rendered = []
    original = family.to_string

    def counting(self, data=None):
        rendered.append(1)
        return original(self, data)

    monkeypatch.setattr(family, "to_string", counting)
    inputs = {
        "diverse": lambda r: prompt.input_model(response=r, n=2, avoid=[P1]),
        "sequential": lambda r: prompt.input_model(response=r, previous_questions=[P1]),
        "stock": lambda r: prompt.input_model(response=r),
    }[mode]

    def fresh(data):  # what RAGAS renders for a new object of the same state
        twin = copy.deepcopy(prompt)
        process = getattr(twin, "process_input", None)
        return original(twin, process(data) if process else data)

    for response in (A, "Another answer", A):
        assert render(prompt, inputs(response)) == fresh(inputs(response))
    assert len(rendered) == 1

    prompt.instruction = "Edited instruction."
    assert render(prompt, inputs(A)).startswith("Edited instruction.\n")
    example_in, example_out = prompt.examples[0]
    # edited in place, same list object; the example object is shared by every prompt of the
    # class, so the edit is undone after the test (monkeypatch) for the tests that follow
    monkeypatch.setattr(example_in, "response", "An edited example answer.")
    assert "An edited example answer." in render(prompt, inputs(A))
    prompt.examples = []
    assert "EXAMPLES" not in render(prompt, inputs(A))
    prompt.language = "spanish"
    assert render(prompt, inputs(A)) == fresh(inputs(A))
    assert len(rendered) == 5


def test_a_prompt_rendering_its_own_way_is_rendered_every_time():
    from ragas_relevancy_ext.scoring.probe_modes import render

    class Counted(DiverseProbePrompt):
        calls = 0

        def to_string(self, data=None):
            type(self).calls += 1
            return f"call {type(self).calls}: " + super().to_string(data)

    prompt = Counted()
    data = prompt.input_model(response=A, n=1)
    assert [render(prompt, data)[:7] for _ in range(3)] == ["call 1:", "call 2:", "call 3:"]


@pytest.mark.parametrize("mode", ["stock", "sequential", "diverse"])
def test_an_api_key_inside_an_unparseable_reply_is_masked_in_the_notes(monkeypatch, mode):
    key = "sk-test-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    good = [(P1, 0), (P2, 0), (P3, 0)] if mode == "diverse" else (P1, 0)
    # as parse_reply words it when a judge echoes the request back instead of JSON
    bad = JudgeReplyError(f"judge reply holds no JSON object: 'Bearer {key} was sent'")
    result, _ = run([bad, good, good, good], mode=mode, strictness=3 if mode == "diverse" else 2)
    notes = "\n".join(result.report.notes)
    assert "call 1: reply did not parse (JudgeReplyError: judge reply holds no JSON" in notes
    assert key not in notes and "***" in notes
    assert key not in str(result.report)


def test_our_modes_strip_the_probes_they_keep():
    result, _ = run([[(f"  {P1}\n", 0), (f"\t{P2}", 0), (f"{P3}\u00a0", 0)]])
    assert [p.question for p in result.report.probes] == [P1, P2, P3]


def test_stock_mode_keeps_replies_as_written_and_flags_as_given():
    replies = [(f"  {P1}\n", 2), (P1, 1), ("", 0), (f"{P2} ", -1)]
    result, judge = run(replies, mode="stock", strictness=4)
    assert [(p.question, p.noncommittal) for p in result.report.probes] == [
        (f"  {P1}\n", 2),
        (P1, 1),
        (f"{P2} ", -1),
    ]
    # stock's rule: every kept flag is truthy, so the answer counts as evasive
    assert result.value == 0.0 and result.report.all_noncommittal
    assert result.report.duplicates_dropped == 0
    assert result.report.notes == ["call 3: dropped an empty question"]
