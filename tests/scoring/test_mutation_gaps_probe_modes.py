"""Probe modes' edges that mutation testing found unchecked: the prompt text angles mode sends
(one call per probe, each worded from its own angle and carrying the response), the notes left
for dropped probes and unreadable replies, the registry, and the error for a prompt that fits
no mode."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from ragas.callbacks import ChainType
from ragas.llms.base import LangchainLLMWrapper
from ragas.prompt import PydanticPrompt
from ragas.prompt.metrics.base_prompt import BasePrompt

from ragas_relevancy_ext import AnswerRelevancy
from ragas_relevancy_ext.errors import JudgeReplyError
from ragas_relevancy_ext.scoring import probe_modes
from ragas_relevancy_ext.scoring.probe_modes import (
    MODES,
    ProbeMode,
    ProbeSet,
    collect_probes,
    normalise_question,
    register,
    render,
    resolve_probe_prompt,
)
from ragas_relevancy_ext.scoring.prompts import AngleProbePrompt, DiverseProbePrompt
from ragas_relevancy_ext.testing.offline import (
    HashEmbeddings,
    PretendJudge,
    ScriptedChatModel,
    ScriptedJudge,
)

RESPONSE = "Refunds reach your card within five working days of the return."


def test_angles_mode_sends_one_prompt_per_probe_each_from_its_own_angle() -> None:
    judge = PretendJudge()
    metric = AnswerRelevancy(
        llm=judge, embeddings=HashEmbeddings(), strictness=3, probe_prompt="angles"
    )
    metric.score(user_input="How long do refunds take?", response=RESPONSE)
    angles = [AngleProbePrompt().angle(i) for i in range(3)]
    assert len(set(angles)) == 3
    assert len(judge.prompts) == 3
    # the sample's own input is the prompt's last part (after the examples)
    inputs = [prompt.rsplit("input: ", 1)[1] for prompt in judge.prompts]
    assert all(RESPONSE in text for text in inputs)
    assert sorted(angle for angle in angles for text in inputs if angle in text) == sorted(angles)


QUESTION = "How long do refunds take?"
P1 = "How long until a refund reaches my card?"
P2 = "When do refunds arrive?"


def notes_of(replies: list[Any], mode: str, strictness: int = 2) -> list[str]:
    judge = ScriptedJudge(replies)
    metric = AnswerRelevancy(judge, HashEmbeddings(), strictness=strictness, probe_prompt=mode)
    return list(metric.score(user_input=QUESTION, response=RESPONSE).report.notes)


def test_stock_notes_whether_a_dropped_question_was_empty_or_only_white_space() -> None:
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
def test_a_dropped_probe_is_noted_with_the_call_that_brought_it(mode: str) -> None:
    notes = notes_of([("  ", 0), (P1, 0), (P2, 0)], mode)
    assert notes[0] == "call 1: dropped an empty question"


def test_a_reply_error_without_a_message_is_noted_with_its_type_only() -> None:
    notes = notes_of([JudgeReplyError(""), [(P1, 0), (P2, 0)]], "diverse")
    assert notes == ["call 1: reply did not parse (JudgeReplyError: )"]


def test_a_reply_error_is_noted_by_its_first_line_cut_at_160_characters() -> None:
    first = "x" * 170
    notes = notes_of([JudgeReplyError(first + "\nsecond line"), [(P1, 0), (P2, 0)]], "diverse")
    assert notes == [f"call 1: reply did not parse (JudgeReplyError: {'x' * 160})"]


def test_register_adds_a_mode_that_a_fitting_prompt_then_resolves_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(probe_modes, "MODES", {})

    async def collect(*args: Any) -> None:
        return None

    mode = ProbeMode("only", "DiverseProbePrompt", collect, "the one mode")
    assert register(mode) is mode
    assert probe_modes.MODES == {"only": mode}
    prompt = DiverseProbePrompt()
    assert resolve_probe_prompt(prompt) == (mode, prompt)


def test_the_built_in_modes_are_registered_with_their_prompts_and_strategies() -> None:
    assert {name: mode.name for name, mode in MODES.items()} == {
        name: name for name in ("diverse", "sequential", "stock", "angles")
    }
    assert [(m.prompt, m.legacy_prompt, m.ragas_replies) for m in MODES.values()] == [
        ("DiverseProbePrompt", "", False),
        ("SequentialProbePrompt", "", False),
        ("AnswerRelevancePrompt", "ResponseRelevancePrompt", True),
        ("AngleProbePrompt", "", False),
    ]
    assert all(mode.help and callable(mode.collect) for mode in MODES.values())
    assert MODES["diverse"].help == "one judge call returns N distinct probes"


def test_the_decorated_strategies_are_registered_as_the_named_modes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(probe_modes, "MODES", {})

    async def collect(*args: Any) -> None:
        return None

    decorated = probe_modes._registered(
        "extra", "AngleProbePrompt", "help text", legacy_prompt="X", ragas_replies=True
    )(collect)
    assert decorated is collect
    assert probe_modes.MODES == {
        "extra": ProbeMode("extra", "AngleProbePrompt", collect, "help text", "X", True)
    }


class Unnamed:
    """A model stand-in without a ``__name__``."""

    def __repr__(self) -> str:
        return "<unnamed model>"


def test_a_prompt_fitting_no_mode_names_its_models_even_without_a_name() -> None:
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


def test_normalise_question_joins_words_with_one_space() -> None:
    assert normalise_question("  What's the  RETURN-policy?\n") == "whats the return policy"


def test_offer_says_whether_it_kept_the_probe() -> None:
    probes = ProbeSet()
    assert probes.offer(P1, 0, "call 1") is True
    assert probes.offer(" ", 0, "call 1") is False
    assert probes.offer(P2, 2, "call 1") is False
    assert probes.offer(P1.upper(), 1, "call 2") is False
    assert (probes.questions, probes.duplicates_dropped) == ([P1], 1)


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
def test_a_prompt_step_is_traced_only_when_named(trace_name: str | None) -> None:
    handler = ChainStarts()
    judge = ScriptedJudge([[(P1, 0), (P2, 0)]])
    mode, prompt = resolve_probe_prompt("diverse")
    probes = asyncio.run(
        collect_probes(judge, mode, prompt, RESPONSE, 2, callbacks=[handler], trace_name=trace_name)
    )
    assert probes.questions == [P1, P2]
    assert handler.names == ([] if trace_name is None else [trace_name])


def test_a_traced_prompt_step_is_marked_as_a_ragas_prompt() -> None:
    handler = ChainStarts()
    mode, prompt = resolve_probe_prompt("diverse")
    judge = ScriptedJudge([[(P1, 0), (P2, 0)]])
    asyncio.run(collect_probes(judge, mode, prompt, RESPONSE, 2, None, [handler], "probes"))
    assert handler.metadata == [{"type": ChainType.RAGAS_PROMPT}]
    assert len(handler.ends) == 1 and not handler.errors


def test_a_traced_prompt_step_ends_with_the_error_that_stopped_it() -> None:
    handler = ChainStarts()
    mode, prompt = resolve_probe_prompt("sequential")
    failure = ConnectionError("judge unreachable")
    judge = ScriptedJudge([(P1, 0), failure])
    with pytest.raises(ConnectionError):
        asyncio.run(collect_probes(judge, mode, prompt, RESPONSE, 2, None, [handler], "probes"))
    assert handler.errors == [failure]
    assert handler.ends == []


def test_our_modes_read_a_ragas_judge_s_reply_without_ragas_repair_requests() -> None:
    model = ScriptedChatModel(replies={RESPONSE: ["no JSON here", [(P1, 0), (P2, 0)]]})
    mode, prompt = resolve_probe_prompt("diverse")
    probes = asyncio.run(collect_probes(LangchainLLMWrapper(model), mode, prompt, RESPONSE, 2))
    assert probes.questions == [P1, P2]
    assert probes.judge_calls == 2
    assert probes.notes == [
        "call 1: reply did not parse (JudgeReplyError: judge reply holds no JSON object: "
        "'no JSON here')"
    ]


def test_a_prompt_without_models_fits_no_mode() -> None:
    class Bare(PydanticPrompt):  # type: ignore[type-arg]
        instruction = "Say something."

    class BareModern(BasePrompt):
        instruction = "Say something."

        def to_string(self, data: Any = None) -> str:
            return self.instruction

    for prompt in (Bare(), BareModern()):
        with pytest.raises(TypeError, match=r"has input/output models None/None, which fit no"):
            resolve_probe_prompt(prompt)


def test_a_prompt_fitting_no_mode_is_told_every_mode_s_models() -> None:
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


def test_a_mode_lists_its_legacy_prompt_class_only_when_it_has_one() -> None:
    assert MODES["diverse"].prompt_classes() == [DiverseProbePrompt]
    assert [c.__name__ for c in MODES["stock"].prompt_classes()] == [
        "AnswerRelevancePrompt",
        "ResponseRelevancePrompt",
    ]


class Shouting(DiverseProbePrompt):
    """A prompt that edits its input before rendering, as RAGAS lets a prompt do."""

    def process_input(self, input: Any) -> Any:
        return input.model_copy(update={"response": input.response.upper()})


def test_render_sends_the_input_as_the_prompt_processes_it() -> None:
    prompt = Shouting()
    data = prompt.input_model(response=RESPONSE, n=2)
    for _ in range(2):  # rendered, then from the kept head
        text = render(prompt, data)
        assert text == prompt.to_string(prompt.process_input(data))
        assert RESPONSE.upper() in text and RESPONSE not in text


def test_render_leaves_out_empty_fields_after_a_kept_head() -> None:
    prompt = DiverseProbePrompt()
    with_avoid = prompt.input_model(response=RESPONSE, n=2, avoid=[P1])
    without = prompt.input_model(response=RESPONSE, n=2)
    assert render(prompt, with_avoid) == prompt.to_string(with_avoid)
    assert render(prompt, without) == prompt.to_string(without)
    assert "avoid" not in render(prompt, without).rsplit("input: ", 1)[1]


def test_a_prompt_with_a_mode_s_input_model_but_no_output_model_fits_no_mode() -> None:
    class HalfMade(PydanticPrompt):  # type: ignore[type-arg]
        instruction = "Say something."
        input_model = DiverseProbePrompt.input_model

    with pytest.raises(TypeError, match=r"has input/output models DiverseProbeInput/None, which"):
        resolve_probe_prompt(HalfMade())
