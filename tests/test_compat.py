"""Drop-in fidelity: each RAGAS feature that works on stock answer relevancy works on ours.

Both flavours, asserting on the text the judge actually received: RAGAS's prompt tools
(``get_prompts``/``set_prompts``/``adapt_prompts``/``save_prompts``/``load_prompts``, and
``prompt.adapt`` on the modern metric), prompt objects of either RAGAS prompt family, ``"stock"``
byte for byte, the prompt step in ``ragas.evaluate`` traces, ``max_workers`` bounding judge calls
across rows, settings changed on a ready instance, and NaN for a sample with no usable probe.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import math
from typing import Any

import pytest
from pydantic import BaseModel
from ragas import EvaluationDataset, evaluate
from ragas.embeddings.base import LangchainEmbeddingsWrapper
from ragas.llms.base import InstructorBaseRagasLLM, LangchainLLMWrapper
from ragas.metrics import AnswerRelevancy as StockLegacy
from ragas.metrics.collections import AnswerRelevancy as StockModern
from ragas.prompt import PydanticPrompt
from ragas.prompt.pydantic_prompt import ToTranslate, Translated
from ragas.run_config import RunConfig

from ragas_relevancy_ext import AnswerRelevancy, ResponseRelevancy, report_for
from ragas_relevancy_ext.scoring.judges import JudgeWrapper
from ragas_relevancy_ext.scoring.prompts import (
    AnswerRelevanceInput,
    AnswerRelevancePrompt,
    DiverseProbeInput,
    DiverseProbeOutput,
    DiverseProbePrompt,
    ResponseRelevanceInput,
    ResponseRelevancePrompt,
)
from ragas_relevancy_ext.testing.offline import (
    HashEmbeddings,
    LangchainHashEmbeddings,
    ScriptedChatModel,
    ScriptedJudge,
    prompt_input,
)

QUESTION = "Where is order A17?"
RESPONSE = "Order A17 shipped on 3 March."
ROW = {"user_input": QUESTION, "response": RESPONSE}
PROBES = [
    ("When did order A17 ship?", 0),
    ("What is the shipping status of order A17?", 0),
    ("Has order A17 shipped yet?", 0),
]
MODES = ["stock", "sequential", "diverse", "angles"]
STEP = "response_relevance_prompt"


def script(mode: str, probes: list[tuple[str, int]] = PROBES) -> list[Any]:
    """The replies a judge gives for one response in ``mode`` (diverse: one list per call)."""
    return [probes] if mode == "diverse" else list(probes)


def chat_for(
    mode: str, rows: list[dict[str, str]] | None = None, **knobs: Any
) -> ScriptedChatModel:
    return ScriptedChatModel(replies={r["response"]: script(mode) for r in rows or [ROW]}, **knobs)


def run_evaluate(
    metric: Any, chat: ScriptedChatModel, rows: list[dict[str, str]] | None = None, **kwargs: Any
) -> Any:
    """``ragas.evaluate`` with a BaseRagasLLM judge over ``chat`` and legacy-style embeddings."""
    return evaluate(
        EvaluationDataset.from_list(rows or [ROW]),
        metrics=[metric],
        llm=LangchainLLMWrapper(chat),
        embeddings=LangchainEmbeddingsWrapper(LangchainHashEmbeddings()),
        show_progress=False,
        **kwargs,
    )


def modern(judge: Any, **kwargs: Any) -> AnswerRelevancy:
    return AnswerRelevancy(llm=judge, embeddings=HashEmbeddings(), **kwargs)


class Translator(InstructorBaseRagasLLM):
    """Translates every statement it is given to ``[es] statement`` (both RAGAS adapt prompts)."""

    is_async = True

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def generate(self, prompt: str, response_model: type[BaseModel]) -> BaseModel:
        return asyncio.run(self.agenerate(prompt, response_model))

    async def agenerate(self, prompt: str, response_model: type[BaseModel]) -> BaseModel:
        self.prompts.append(prompt)
        marker = "Statements to translate:\n"  # the collections BasePrompt.adapt prompt
        if marker in prompt:
            statements = json.loads(prompt.split(marker, 1)[1])
        else:  # PydanticPrompt.adapt's TranslateStatements prompt
            statements = prompt_input(prompt)["statements"]
        return response_model.model_validate({"statements": [f"[es] {s}" for s in statements]})


class Unfit(PydanticPrompt[ToTranslate, Translated]):
    instruction = "Translate."
    input_model = ToTranslate
    output_model = Translated


class TerseLegacy(ResponseRelevancePrompt):
    instruction = "Write the question this answer replies to. Flag noncommittal answers with 1."


class TerseModern(AnswerRelevancePrompt):
    instruction = "Write the question this answer replies to. Flag noncommittal answers with 1."


class TerseDiverse(PydanticPrompt[DiverseProbeInput, DiverseProbeOutput]):
    instruction = "Write n questions this answer replies to, each with a noncommittal flag."
    input_model = DiverseProbeInput
    output_model = DiverseProbeOutput


def legacy_stock_text(response: str = RESPONSE) -> str:
    return ResponseRelevancePrompt().to_string(ResponseRelevanceInput(response=response))


def modern_stock_text(response: str = RESPONSE) -> str:
    return AnswerRelevancePrompt().to_string(AnswerRelevanceInput(response=response))


# --- 1. RAGAS's prompt tools act on the prompt that is sent ---------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_legacy_get_prompts_is_the_prompt_sent_under_stocks_name(mode: str) -> None:
    assert list(StockLegacy().get_prompts()) == [STEP]
    metric = ResponseRelevancy(probe_prompt=mode)
    assert list(metric.get_prompts()) == [STEP]
    assert metric.get_prompts()[STEP] is metric.question_generation
    chat = chat_for(mode)
    run_evaluate(metric, chat)
    sent = metric.question_generation
    first = prompt_input(chat.prompts[0])
    assert chat.prompts[0] == sent.to_string(sent.input_model(**first))


def test_legacy_set_prompts_changes_what_the_judge_receives_as_on_stock() -> None:
    received = {}
    for name, metric in (
        ("stock", StockLegacy(strictness=3)),
        ("ours", ResponseRelevancy(strictness=3, probe_prompt="stock")),
    ):
        prompt = copy.deepcopy(metric.get_prompts()[STEP])  # stock's default is shared
        prompt.instruction = "Answer in one short question. " + prompt.instruction
        metric.set_prompts(**{STEP: prompt})
        chat = chat_for("stock")
        run_evaluate(metric, chat)
        received[name] = chat.prompts
    assert received["ours"] == received["stock"]
    assert len(received["ours"]) == 3
    assert all(p.startswith("Answer in one short question. ") for p in received["ours"])


def test_legacy_set_prompts_in_the_default_mode_and_its_errors() -> None:
    metric = ResponseRelevancy()
    prompt = metric.get_prompts()[STEP]
    assert type(prompt) is DiverseProbePrompt
    prompt.instruction = "Write them in Spanish. " + prompt.instruction
    metric.set_prompts(**{STEP: prompt})
    chat = chat_for("diverse")
    result = run_evaluate(metric, chat)
    assert len(chat.prompts) == 1 and chat.prompts[0].startswith("Write them in Spanish. ")
    assert report_for(result, 0).probe_prompt == "DiverseProbePrompt"  # edited: not "diverse"
    with pytest.raises(ValueError, match="does not exist"):
        metric.set_prompts(question_generation=prompt)
    with pytest.raises(TypeError, match="Unfit"):
        metric.set_prompts(**{STEP: Unfit()})


def test_legacy_adapt_save_and_load_prompts_reach_the_judge(tmp_path) -> None:
    metric = ResponseRelevancy(probe_prompt="stock", strictness=1)
    translator = Translator()
    adapted = asyncio.run(metric.adapt_prompts("spanish", llm=translator))
    assert list(adapted) == [STEP] and translator.prompts  # the translator was asked
    metric.set_prompts(**adapted)
    chat = chat_for("stock")
    result = run_evaluate(metric, chat)
    assert "[es] Where was Albert Einstein born?" in chat.prompts[0]
    assert chat.prompts[0].startswith(ResponseRelevancePrompt.instruction)
    assert report_for(result, 0).probe_prompt == "ResponseRelevancePrompt (spanish)"

    metric.save_prompts(str(tmp_path))
    assert (tmp_path / f"answer_relevancy_{STEP}_spanish.json").exists()
    fresh = ResponseRelevancy(probe_prompt="stock", strictness=1)
    fresh.set_prompts(**fresh.load_prompts(str(tmp_path), "spanish"))
    again = chat_for("stock")
    run_evaluate(fresh, again)
    assert again.prompts == chat.prompts


def test_legacy_save_prompts_names_a_prompt_family_without_save(tmp_path) -> None:
    metric = ResponseRelevancy(probe_prompt=AnswerRelevancePrompt())
    with pytest.raises(TypeError, match="save_prompts needs a ragas.prompt.PydanticPrompt"):
        metric.save_prompts(str(tmp_path))
    with pytest.raises(TypeError, match="load_prompts needs"):
        metric.load_prompts(str(tmp_path))


def test_modern_prompt_adapt_reaches_the_judge_as_on_stock() -> None:
    received = {}
    for name, metric in (
        ("stock", StockModern(llm=ScriptedJudge(PROBES), embeddings=HashEmbeddings())),
        ("ours", modern(ScriptedJudge(PROBES), probe_prompt="stock")),
    ):
        metric.prompt = asyncio.run(metric.prompt.adapt("spanish", llm=Translator()))
        metric.score(user_input=QUESTION, response=RESPONSE)
        received[name] = metric.llm.prompts
    assert received["ours"] == received["stock"]
    assert "[es] Where was Albert Einstein born?" in received["ours"][0]

    ours = modern(ScriptedJudge([PROBES]))  # the default prompt adapts the same way
    ours.prompt = asyncio.run(ours.prompt.adapt("spanish", llm=Translator()))
    result = ours.score(user_input=QUESTION, response=RESPONSE)
    assert "[es] What is the capital of France?" in ours.llm.prompts[0]
    assert result.report.probe_prompt == "DiverseProbePrompt (spanish)"


# --- 2. PydanticPrompt objects are accepted where their models fit a mode --------------------


def test_legacy_takes_pydantic_prompts_that_fit_a_mode_and_names_those_that_do_not() -> None:
    metric = ResponseRelevancy(probe_prompt=TerseLegacy(), strictness=2)
    chat = chat_for("stock")
    result = run_evaluate(metric, chat)
    terse = TerseLegacy().to_string(ResponseRelevanceInput(response=RESPONSE))
    assert chat.prompts == [terse, terse]
    assert report_for(result, 0).probe_prompt == "TerseLegacy"

    metric = ResponseRelevancy(probe_prompt=TerseDiverse())
    chat = chat_for("diverse")
    run_evaluate(metric, chat)
    assert len(chat.prompts) == 1 and chat.prompts[0].startswith(TerseDiverse.instruction)

    with pytest.raises(TypeError, match=r"Unfit \(ragas.prompt.pydantic_prompt.PydanticPrompt\)"):
        ResponseRelevancy(probe_prompt=Unfit())
    with pytest.raises(TypeError, match="ToTranslate/Translated, which fit no probe mode"):
        metric.question_generation = Unfit()


def test_modern_takes_pydantic_prompts_that_fit_a_mode_and_names_those_that_do_not() -> None:
    judge = ScriptedJudge(PROBES)
    result = modern(judge, probe_prompt=ResponseRelevancePrompt()).score(
        user_input=QUESTION, response=RESPONSE
    )
    assert judge.prompts == [legacy_stock_text()] * 3
    assert result.report.probe_prompt == "stock"

    judge = ScriptedJudge([PROBES])
    modern(judge, probe_prompt=TerseDiverse()).score(user_input=QUESTION, response=RESPONSE)
    assert judge.calls == 1 and judge.prompts[0].startswith(TerseDiverse.instruction)

    with pytest.raises(TypeError, match="ToTranslate/Translated, which fit no probe mode"):
        modern(ScriptedJudge([]), probe_prompt=Unfit())
    metric = modern(ScriptedJudge([]))
    with pytest.raises(TypeError, match="Unfit"):
        metric.prompt = Unfit()
    with pytest.raises(TypeError, match="got int"):
        metric.prompt = 42


# --- 3. "stock" is each flavour's stock prompt, byte for byte --------------------------------


def test_legacy_stock_sends_stock_legacys_prompt_byte_for_byte() -> None:
    received = {}
    for name, metric in (
        ("stock", StockLegacy(strictness=3)),
        ("ours", ResponseRelevancy(strictness=3, probe_prompt="stock")),
    ):
        chat = chat_for("stock")
        run_evaluate(metric, chat)
        received[name] = chat.prompts
    assert received["ours"] == received["stock"] == [legacy_stock_text()] * 3
    assert legacy_stock_text() != modern_stock_text()


def test_modern_stock_sends_the_collections_prompt_byte_for_byte() -> None:
    stock_judge, ours_judge = ScriptedJudge(PROBES), ScriptedJudge(PROBES)
    StockModern(llm=stock_judge, embeddings=HashEmbeddings()).score(
        user_input=QUESTION, response=RESPONSE
    )
    modern(ours_judge, probe_prompt="stock").score(user_input=QUESTION, response=RESPONSE)
    assert ours_judge.prompts == stock_judge.prompts == [modern_stock_text()] * 3


# --- 4. stock's prompt step stays in evaluate's traces, the report beside it -----------------


def test_legacy_traces_keep_stocks_prompt_step_and_add_the_report() -> None:
    stock = run_evaluate(StockLegacy(strictness=3), chat_for("stock")).traces[0]
    ours = run_evaluate(ResponseRelevancy(probe_prompt="stock"), chat_for("stock")).traces[0]
    assert set(stock["answer_relevancy"]) == {STEP}
    assert set(ours["answer_relevancy"]) == {STEP, "relevancy_report"}
    # the step's output is the reply of one of the strictness calls, whichever the loop ran last
    for step in (ours["answer_relevancy"][STEP], stock["answer_relevancy"][STEP]):
        assert step.keys() == stock["answer_relevancy"][STEP].keys()
        assert step["input"] == ResponseRelevanceInput(response=RESPONSE)
        assert (step["output"].question, step["output"].noncommittal) in PROBES


@pytest.mark.parametrize("mode", ["sequential", "diverse"])
def test_legacy_traces_show_the_prompt_step_in_every_mode(mode: str) -> None:
    steps = run_evaluate(ResponseRelevancy(probe_prompt=mode), chat_for(mode)).traces[0]
    step = steps["answer_relevancy"][STEP]
    assert step["input"].response == RESPONSE
    assert step["output"].model_dump()  # the judge's first reply, parsed
    assert steps["answer_relevancy"]["relevancy_report"]["output"]["judge_calls"] >= 1


# --- 5. one limiter across a run's rows: max_workers bounds judge calls in flight ------------


ROWS = [{"user_input": f"{QUESTION} ({i})", "response": f"{RESPONSE} Ref {i}."} for i in range(4)]


@pytest.mark.parametrize(("workers", "cap", "peak"), [(2, 16, 2), (3, 1, 1), (-1, 2, 2)])
def test_legacy_max_workers_bounds_judge_calls_across_rows(workers, cap, peak) -> None:
    chat = chat_for("stock", ROWS, latency=0.02)
    metric = ResponseRelevancy(strictness=3, probe_prompt="stock", max_concurrency=cap)
    result = run_evaluate(metric, chat, ROWS, run_config=RunConfig(max_workers=workers))
    assert len(chat.prompts) == 12 and not any(math.isnan(s) for s in result["answer_relevancy"])
    assert chat.peak == peak


def test_modern_max_concurrency_bounds_judge_calls_across_rows() -> None:
    chat = chat_for("stock", ROWS, latency=0.02)
    metric = modern(JudgeWrapper(chat), strictness=3, probe_prompt="stock", max_concurrency=2)
    results = metric.batch_score(ROWS)
    assert len(chat.prompts) == 12 and all(r.value > 0 for r in results)
    assert chat.peak == 2


# --- 6. a prompt, a mode or a strictness set on a ready instance takes effect ----------------


def test_modern_docs_pattern_prompt_subclass_on_a_ready_instance() -> None:
    judge = ScriptedJudge(PROBES)
    metric = modern(judge)  # default diverse mode
    metric.prompt = TerseModern()  # RAGAS's docs: metric.prompt = MyPrompt()
    result = metric.score(user_input=QUESTION, response=RESPONSE)
    terse = TerseModern().to_string(AnswerRelevanceInput(response=RESPONSE))
    assert judge.prompts == [terse] * 3  # stock mode: one call per probe
    assert result.report.probe_prompt == "TerseModern" and metric.probe_mode == "stock"
    stock_judge = ScriptedJudge(PROBES)
    stock = StockModern(llm=stock_judge, embeddings=HashEmbeddings())
    stock.prompt = TerseModern()
    assert stock.score(user_input=QUESTION, response=RESPONSE).value == pytest.approx(
        result.value, abs=1e-12
    )
    assert stock_judge.prompts == judge.prompts


def test_legacy_question_generation_set_on_a_ready_instance() -> None:
    metric = ResponseRelevancy()
    metric.question_generation = prompt = TerseLegacy()  # stock's attribute for its prompt
    chat = chat_for("stock")
    result = run_evaluate(metric, chat)
    terse = TerseLegacy().to_string(ResponseRelevanceInput(response=RESPONSE))
    assert chat.prompts == [terse] * 3
    assert report_for(result, 0).probe_prompt == "TerseLegacy"
    assert metric.probe_prompt is prompt is metric.question_generation


def test_a_prompt_object_set_as_probe_prompt_reads_back_as_that_object() -> None:
    modern_prompt, legacy_prompt = TerseModern(), TerseLegacy()
    metric = modern(ScriptedJudge(PROBES), probe_prompt=modern_prompt)
    assert metric.probe_prompt is modern_prompt is metric.prompt
    assert metric.score(user_input=QUESTION, response=RESPONSE).report.probe_prompt == "TerseModern"
    legacy = ResponseRelevancy(probe_prompt=legacy_prompt)
    assert legacy.probe_prompt is legacy_prompt is legacy.question_generation
    assert dataclasses.replace(legacy).probe_prompt is legacy_prompt
    metric.probe_prompt = "stock"
    assert metric.probe_prompt == "stock" and type(metric.prompt) is AnswerRelevancePrompt


def test_strictness_set_on_a_ready_instance_takes_effect_in_both_flavours() -> None:
    judge = ScriptedJudge(PROBES * 2)
    metric = modern(judge, probe_prompt="stock")
    metric.strictness = 5
    assert len(metric.score(user_input=QUESTION, response=RESPONSE).report.probes) == 5
    assert judge.calls == 5

    legacy = ResponseRelevancy(probe_prompt="stock")
    legacy.strictness = 5
    chat = chat_for("stock")
    result = run_evaluate(legacy, chat)
    assert len(chat.prompts) == 5 and report_for(result, 0).strictness == 5


# --- 7. probe_prompt set on a ready instance takes effect, and the report says so ------------


def test_modern_probe_prompt_set_on_a_ready_instance() -> None:
    judge = ScriptedJudge(PROBES + [PROBES])
    metric = modern(judge)
    metric.probe_prompt = "stock"
    result = metric.score(user_input=QUESTION, response=RESPONSE)
    assert judge.prompts == [modern_stock_text()] * 3
    assert result.report.probe_prompt == "stock" == metric.probe_prompt
    assert type(metric.prompt) is AnswerRelevancePrompt
    metric.probe_prompt = "diverse"
    result = metric.score(user_input=QUESTION, response=RESPONSE)
    assert judge.calls == 4 and prompt_input(judge.prompts[3])["n"] == 3
    assert result.report.probe_prompt == "diverse"


def test_legacy_probe_prompt_set_on_a_ready_instance() -> None:
    metric = ResponseRelevancy()
    metric.probe_prompt = "stock"
    chat = chat_for("stock")
    result = run_evaluate(metric, chat)
    assert chat.prompts == [legacy_stock_text()] * 3
    assert report_for(result, 0).probe_prompt == "stock" == metric.probe_prompt
    assert type(metric.question_generation) is ResponseRelevancePrompt
    with pytest.raises(ValueError, match="TerseLegacy and probe_prompt='stock' disagree"):
        ResponseRelevancy(probe_prompt="stock", question_generation=TerseLegacy())
    # dataclasses.replace passes both, in agreement: the prompt object is kept
    again = dataclasses.replace(metric, strictness=5)
    assert again.question_generation is metric.question_generation and again.strictness == 5


# --- 8. no usable probe is NaN with its cause; 0 only when every probe is noncommittal -------

UNUSABLE = ["not JSON at all", '{"question": "", "noncommittal": 0}', '{"answer": 1}']


def test_modern_no_usable_probe_is_nan_with_a_reason() -> None:
    result = modern(ScriptedJudge(UNUSABLE), probe_prompt="stock").score(
        user_input=QUESTION, response=RESPONSE
    )
    assert math.isnan(result.value) and result.report.error is None
    assert result.reason.startswith("Not scored: the judge wrote no usable probe question")
    assert any("did not parse" in n for n in result.report.notes)
    assert any("empty question" in n for n in result.report.notes)

    evasive = [(q, 1) for q, _ in PROBES]
    result = modern(ScriptedJudge(evasive), probe_prompt="stock").score(
        user_input=QUESTION, response=RESPONSE
    )
    assert result.value == 0.0 and "noncommittal" in result.reason


@pytest.mark.parametrize("mode", ["stock", "diverse"])
def test_legacy_no_usable_probe_is_nan_with_a_reason(mode: str) -> None:
    chat = ScriptedChatModel(replies={RESPONSE: UNUSABLE})
    result = run_evaluate(ResponseRelevancy(probe_prompt=mode), chat)
    report = report_for(result, 0)
    assert math.isnan(result["answer_relevancy"][0]) and math.isnan(report.score)
    assert report.reason.startswith("Not scored: the judge wrote no usable probe question")
    assert report.error is None and report.notes

    evasive = ScriptedChatModel(replies={RESPONSE: script(mode, [(q, 1) for q, _ in PROBES])})
    result = run_evaluate(ResponseRelevancy(probe_prompt=mode), evasive)
    assert result["answer_relevancy"][0] == 0.0
    assert report_for(result, 0).all_noncommittal


def test_command_line_counts_no_usable_probe_as_nan_with_its_reason(tmp_path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from ragas_relevancy_ext.cli import app
    from ragas_relevancy_ext.cli import setup as runner
    from ragas_relevancy_ext.cli.providers import Built, Spec

    judge = ScriptedJudge(["not JSON at all"] * 3 + [[(q, 0) for q, _ in PROBES]])
    monkeypatch.setattr(
        runner, "build_judge", lambda *a, **k: Built(judge, "scripted", Spec("offline", ""))
    )
    data, out = tmp_path / "rows.jsonl", tmp_path / "out.jsonl"
    data.write_text(json.dumps(ROW) + "\n", encoding="utf-8")
    result = CliRunner().invoke(
        app, ["score", str(data), "--embeddings", "hash", "--out", str(out)]
    )
    assert "NaN: 1 (no_usable_probe 1)" in result.stdout and "score 0: 0" in result.stdout
    assert "Not scored: the judge wrote no usable probe question" in result.stdout
    line = json.loads(out.read_text(encoding="utf-8"))
    assert line["score"] is None and line["error"] is None


def test_command_line_summary_counts_nan_by_cause() -> None:
    from ragas_relevancy_ext.cli.stats import summarise

    items = [(1, math.nan, "a"), (2, math.nan, "b"), (3, 0.0, "c"), (4, math.nan, "d")]
    causes = {1: "no usable probe", 2: "TimeoutError", 3: "unused", 4: "no usable probe"}
    summary = summarise(items, causes=causes)
    assert (summary.zeros, summary.nans) == (1, 3)
    assert summary.nan_causes == {"no usable probe": 2, "TimeoutError": 1}
    assert summary.nans_text() == "3 (no usable probe 2, TimeoutError 1)"
