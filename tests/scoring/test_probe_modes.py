"""Probe modes (stock, sequential, diverse) and every malformed judge reply, scripted; the
registry (a mode per name, the mode a prompt object fits, the error for one that fits none),
the text each prompt renders, and the trace step RAGAS sees."""

from __future__ import annotations

import asyncio
import copy
import json
import math
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from ragas.callbacks import ChainType
from ragas.llms.base import LangchainLLMWrapper
from ragas.prompt import PydanticPrompt
from ragas.prompt.metrics.base_prompt import BasePrompt

from ragas_relevancy_ext import AnswerRelevancy, DiverseProbePrompt, SequentialProbePrompt
from ragas_relevancy_ext.errors import JudgeReplyError
from ragas_relevancy_ext.scoring import probe_modes
from ragas_relevancy_ext.scoring.probe_modes import (
    MAX_EXTRA_CALLS,
    ProbeMode,
    ProbeSet,
    collect_probes,
    normalise_question,
    register,
    render,
    resolve_probe_prompt,
)
from ragas_relevancy_ext.scoring.prompts import AnswerRelevancePrompt
from ragas_relevancy_ext.testing.offline import (
    HashEmbeddings,
    PretendJudge,
    ScriptedChatModel,
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
    assert judge.calls == 1 + MAX_EXTRA_CALLS
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
    prompt = probe_modes.MODES[mode].prompt_class()()
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


def notes_of(replies: list[Any], mode: str, strictness: int = 2) -> list[str]:
    result, _ = run(replies, mode=mode, strictness=strictness)
    return list(result.report.notes)


def test_stock_notes_whether_a_dropped_question_was_empty_or_only_white_space():
    probes = ProbeSet()
    probes.keep_as_stock("", 0, "call 1")
    probes.keep_as_stock("  \n", 1, "call 2")
    probes.keep_as_stock(P1, 1, "call 3")
    assert probes.notes == [
        "call 1: dropped an empty question",
        "call 2: dropped a whitespace-only question",
    ]
    assert (probes.questions, probes.noncommittal) == ([P1], [1])


@pytest.mark.parametrize("mode", ["sequential", "angles"])
def test_a_dropped_probe_is_noted_with_the_call_that_brought_it(mode):
    notes = notes_of([("  ", 0), (P1, 0), (P2, 0)], mode)
    assert notes[0] == "call 1: dropped an empty question"


def test_a_reply_error_without_a_message_is_noted_with_its_type_only():
    notes = notes_of([JudgeReplyError(""), [(P1, 0), (P2, 0)]], "diverse")
    assert notes == ["call 1: reply did not parse (JudgeReplyError: )"]


def test_a_reply_error_is_noted_by_its_first_line_cut_at_160_characters():
    first = "x" * 170
    notes = notes_of([JudgeReplyError(first + "\nsecond line"), [(P1, 0), (P2, 0)]], "diverse")
    assert notes == [f"call 1: reply did not parse (JudgeReplyError: {'x' * 160})"]


def test_normalise_question_joins_words_with_one_space():
    assert normalise_question("  What's the  RETURN-policy?\n") == "whats the return policy"


def test_offer_says_whether_it_kept_the_probe():
    probes = ProbeSet()
    assert probes.offer(P1, 0, "call 1") is True
    assert probes.offer(" ", 0, "call 1") is False
    assert probes.offer(P2, 2, "call 1") is False
    assert probes.offer(P1.upper(), 1, "call 2") is False
    assert (probes.questions, probes.duplicates_dropped) == ([P1], 1)


# -- the registry ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "modern", "legacy"),
    [
        ("diverse", "DiverseProbePrompt", "DiverseProbePrompt"),
        ("sequential", "SequentialProbePrompt", "SequentialProbePrompt"),
        ("stock", "AnswerRelevancePrompt", "ResponseRelevancePrompt"),
        ("angles", "AngleProbePrompt", "AngleProbePrompt"),
    ],
)
def test_each_mode_name_gives_its_prompt_to_either_flavour_and_the_prompt_fits_it_back(
    name, modern, legacy
):
    mode, prompt = resolve_probe_prompt(name)
    assert (mode.name, type(prompt).__name__) == (name, modern)
    assert type(resolve_probe_prompt(name, legacy=True)[1]).__name__ == legacy
    assert [c.__name__ for c in mode.prompt_classes()] == list(dict.fromkeys([modern, legacy]))
    for flavour in (False, True):
        given = resolve_probe_prompt(name, legacy=flavour)[1]
        assert resolve_probe_prompt(given) == (mode, given)


def test_register_adds_a_mode_that_a_fitting_prompt_then_resolves_to(monkeypatch):
    monkeypatch.setattr(probe_modes, "MODES", {})

    async def collect(*args: Any) -> None:
        return None

    mode = ProbeMode("only", "DiverseProbePrompt", collect, "the one mode")
    assert register(mode) is mode
    assert probe_modes.MODES == {"only": mode}
    prompt = DiverseProbePrompt()
    assert resolve_probe_prompt(prompt) == (mode, prompt)


class Unnamed:
    """A model stand-in without a ``__name__``."""

    def __repr__(self) -> str:
        return "<unnamed model>"


def test_a_prompt_fitting_no_mode_names_its_models_even_without_a_name():
    class Odd(PydanticPrompt):  # type: ignore[type-arg]
        instruction = "Say something."

    prompt = Odd()
    prompt.input_model = Unnamed()  # type: ignore[assignment]
    prompt.output_model = None  # type: ignore[assignment]
    with pytest.raises(TypeError) as caught:
        resolve_probe_prompt(prompt)
    assert str(caught.value).startswith(
        "Odd (ragas.prompt.pydantic_prompt.PydanticPrompt) has input/output models "
        "<unnamed model>/None, which fit no probe mode"
    )


def test_a_prompt_without_both_models_fits_no_mode():
    class Bare(PydanticPrompt):  # type: ignore[type-arg]
        instruction = "Say something."

    class BareModern(BasePrompt):
        instruction = "Say something."

        def to_string(self, data: Any = None) -> str:
            return self.instruction

    class HalfMade(PydanticPrompt):  # type: ignore[type-arg]
        instruction = "Say something."
        input_model = DiverseProbePrompt.input_model

    for prompt, models in [
        (Bare(), "None/None"),
        (BareModern(), "None/None"),
        (HalfMade(), "DiverseProbeInput/None"),
    ]:
        with pytest.raises(TypeError, match=f"has input/output models {models}, which fit no"):
            resolve_probe_prompt(prompt)


def test_a_prompt_fitting_no_mode_is_told_every_mode_s_models():
    class Bare(PydanticPrompt):  # type: ignore[type-arg]
        instruction = "Say something."

    with pytest.raises(TypeError) as caught:
        resolve_probe_prompt(Bare())
    assert str(caught.value).endswith(
        "a probe prompt needs the input/output models of one of "
        "(diverse: DiverseProbeInput/DiverseProbeOutput; "
        "sequential: SequentialProbeInput/AnswerRelevanceOutput; "
        "stock: AnswerRelevanceInput/AnswerRelevanceOutput or "
        "ResponseRelevanceInput/ResponseRelevanceOutput; "
        "angles: AngleProbeInput/AngleProbeOutput)"
    )


# -- the text a prompt renders -----------------------------------------------------------------


class Shouting(DiverseProbePrompt):
    """A prompt that edits its input before rendering, as RAGAS lets a prompt do."""

    def process_input(self, input: Any) -> Any:
        return input.model_copy(update={"response": input.response.upper()})


def test_render_sends_the_input_as_the_prompt_processes_it():
    prompt = Shouting()
    data = prompt.input_model(response=A, n=2)
    for _ in range(2):  # rendered, then from the kept head
        text = render(prompt, data)
        assert text == prompt.to_string(prompt.process_input(data))
        assert A.upper() in text and A not in text


def test_render_leaves_out_empty_fields_after_a_kept_head():
    prompt = DiverseProbePrompt()
    with_avoid = prompt.input_model(response=A, n=2, avoid=[P1])
    without = prompt.input_model(response=A, n=2)
    assert render(prompt, with_avoid) == prompt.to_string(with_avoid)
    assert render(prompt, without) == prompt.to_string(without)
    assert "avoid" not in render(prompt, without).rsplit("input: ", 1)[1]


# -- the trace step RAGAS sees -----------------------------------------------------------------


class ChainStarts(BaseCallbackHandler):
    """Notes each traced chain: its name and metadata when it starts, and how it ends."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.metadata: list[Any] = []
        self.ends: list[Any] = []
        self.errors: list[BaseException] = []

    def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self.names.append(kwargs.get("name") or (serialized or {}).get("name", "?"))
        self.metadata.append(kwargs.get("metadata"))

    def on_chain_end(self, outputs: Any, **kwargs: Any) -> None:
        self.ends.append(outputs)

    def on_chain_error(self, error: BaseException, **kwargs: Any) -> None:
        self.errors.append(error)


@pytest.mark.parametrize("trace_name", [None, "probe_prompt"])
def test_a_prompt_step_is_traced_only_when_named(trace_name):
    handler = ChainStarts()
    judge = ScriptedJudge([[(P1, 0), (P2, 0)]])
    mode, prompt = resolve_probe_prompt("diverse")
    probes = asyncio.run(
        collect_probes(judge, mode, prompt, A, 2, callbacks=[handler], trace_name=trace_name)
    )
    assert probes.questions == [P1, P2]
    assert handler.names == ([] if trace_name is None else [trace_name])
    if trace_name is not None:  # marked as a RAGAS prompt, ended once with no error
        assert handler.metadata == [{"type": ChainType.RAGAS_PROMPT}]
        assert len(handler.ends) == 1 and not handler.errors


def test_a_traced_prompt_step_ends_with_the_error_that_stopped_it():
    handler = ChainStarts()
    mode, prompt = resolve_probe_prompt("sequential")
    failure = ConnectionError("judge unreachable")
    judge = ScriptedJudge([(P1, 0), failure])
    with pytest.raises(ConnectionError):
        asyncio.run(collect_probes(judge, mode, prompt, A, 2, None, [handler], "probes"))
    assert handler.errors == [failure]
    assert handler.ends == []


def test_our_modes_read_a_ragas_judge_s_reply_without_ragas_repair_requests():
    model = ScriptedChatModel(replies={A: ["no JSON here", [(P1, 0), (P2, 0)]]})
    mode, prompt = resolve_probe_prompt("diverse")
    probes = asyncio.run(collect_probes(LangchainLLMWrapper(model), mode, prompt, A, 2))
    assert probes.questions == [P1, P2]
    assert probes.judge_calls == 2
    assert probes.notes == [
        "call 1: reply did not parse (JudgeReplyError: judge reply holds no JSON object: "
        "'no JSON here')"
    ]
