"""Probes in the user's language: what our prompts ask, adapting to a named language once,
each probe's language in the report, and the mechanism end to end on six languages.

Judges are scripted (fixtures/multilingual.json); embeddings are offline character n-grams.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
from typing import Any

import py3langid  # a declared dependency: without it these tests fail, never skip
import pytest
from common import FIXTURES, ROOT, TranslationCounter
from pydantic import BaseModel
from ragas import EvaluationDataset, evaluate
from ragas.dataset_schema import SingleTurnSample
from ragas.llms.base import InstructorBaseRagasLLM

from ragas_relevancy_ext import AnswerRelevancy, ResponseRelevancy, report_for
from ragas_relevancy_ext.scoring.languages import check_language, detect_language
from ragas_relevancy_ext.scoring.probe_modes import render
from ragas_relevancy_ext.scoring.prompts import (
    AngleProbeInput,
    AngleProbePrompt,
    AnswerRelevancePrompt,
    DiverseProbeInput,
    DiverseProbePrompt,
    ResponseRelevancePrompt,
    SequentialProbeInput,
    SequentialProbePrompt,
)
from ragas_relevancy_ext.scoring.report import (
    Probe,
    RelevancyReport,
    format_report,
    language_clause,
)
from ragas_relevancy_ext.store.cache import CachedJudge
from ragas_relevancy_ext.testing.offline import (
    HashEmbeddings,
    NgramEmbeddings,
    ScriptedJudge,
    prompt_input,
)

FIXTURE = FIXTURES / "multilingual.json"
ROWS: list[dict[str, Any]] = json.loads(FIXTURE.read_text(encoding="utf-8"))["rows"]
LANGUAGES = ["ja", "zh", "pl", "fr", "de", "ar"]
ASKS = "in the language of the answer"


class FixtureJudge(InstructorBaseRagasLLM):
    """Replies from the fixture by the prompt's response; translates as ``[xx] statement``.

    ``probe_calls`` and ``translation_calls`` count what it was asked.
    """

    is_async = True

    def __init__(self, which: str = "ours", tag: str = "[ja]") -> None:
        self.which, self.tag = which, tag
        self.replies = {row["response"]: row[which] for row in ROWS}
        self.probe_calls = 0
        self.translation_calls = 0
        self.prompts: list[str] = []

    def generate(self, prompt: str, response_model: type[BaseModel]) -> BaseModel:
        return asyncio.run(self.agenerate(prompt, response_model))

    async def agenerate(self, prompt: str, response_model: type[BaseModel]) -> BaseModel:
        self.prompts.append(prompt)
        if "statements" in response_model.model_fields:  # RAGAS's translation prompt
            self.translation_calls += 1
            statements = prompt_input(prompt)["statements"]
            return response_model.model_validate(
                {"statements": [f"{self.tag} {s}" for s in statements]}
            )
        self.probe_calls += 1
        data = prompt_input(prompt)
        pairs = self.replies[data["response"]]
        items = [{"question": q, "noncommittal": f} for q, f in pairs]
        if "probes" in response_model.model_fields:
            return response_model.model_validate({"probes": items[: data["n"]]})
        return response_model.model_validate(items[self.probe_calls % len(items)])


def rows_of(language: str, kind: str | None = None) -> list[dict[str, Any]]:
    return [r for r in ROWS if r["language"] == language and kind in (None, r["kind"])]


def inputs(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"user_input": r["user_input"], "response": r["response"]} for r in rows]


# --- 1. our prompts ask for the response's language; "auto" is the default ---------------------


def test_our_prompts_ask_for_probes_in_the_responses_language_and_stock_does_not() -> None:
    diverse = render(DiverseProbePrompt(), DiverseProbeInput(response="Bonjour.", n=3))
    sequential = render(SequentialProbePrompt(), SequentialProbeInput(response="Bonjour."))
    angles = render(AngleProbePrompt(), AngleProbeInput(response="Bonjour.", angle="plain"))
    assert ASKS in diverse and ASKS in sequential and ASKS in angles
    assert ASKS not in AnswerRelevancePrompt().instruction
    assert ASKS not in ResponseRelevancePrompt().instruction


@pytest.mark.parametrize("probe_prompt", ["diverse", "sequential", "angles", "stock"])
def test_auto_is_the_default_on_both_flavours_and_sends_the_prompt_as_it_is(probe_prompt) -> None:
    row = rows_of("ja", "good")[0]
    judge = FixtureJudge()
    metric = AnswerRelevancy(
        llm=judge, embeddings=NgramEmbeddings(), probe_prompt=probe_prompt, strictness=3
    )
    assert metric.language == "auto" and ResponseRelevancy().language == "auto"
    metric.score(user_input=row["user_input"], response=row["response"])
    assert judge.translation_calls == 0
    assert (ASKS in judge.prompts[0]) == (probe_prompt != "stock")


# --- 2. a named language adapts the prompt once per metric ------------------------------------


def test_modern_named_language_translates_once_for_a_whole_batch() -> None:
    judge = FixtureJudge()
    metric = AnswerRelevancy(llm=judge, embeddings=NgramEmbeddings(), language="Japanese")
    rows = rows_of("ja")
    results = metric.batch_score(inputs(rows))
    assert judge.translation_calls == 1  # six concurrent rows, one translation
    assert judge.probe_calls == len(rows)
    probe_prompts = [p for p in judge.prompts if "[ja]" in p]
    assert len(probe_prompts) == len(rows)  # every probe prompt carries the translated examples
    assert "[ja] Paris is the capital of France" in probe_prompts[0]
    assert all(r.report.probe_prompt == "diverse (japanese)" for r in results)
    metric.batch_score(inputs(rows))  # a second batch pays nothing more
    assert judge.translation_calls == 1
    metric.language = "french"  # another language: one more translation
    for row in rows[:2]:  # single scores share the metric's translation too
        metric.score(user_input=row["user_input"], response=row["response"])
    assert judge.translation_calls == 2


def test_legacy_named_language_translates_once_across_concurrent_rows() -> None:
    judge = FixtureJudge(tag="[zh]")
    metric = ResponseRelevancy(llm=judge, embeddings=NgramEmbeddings(), language="chinese")
    rows = rows_of("zh")

    async def run() -> list[float]:
        samples = [SingleTurnSample(**row) for row in inputs(rows)]
        return await asyncio.gather(*(metric.single_turn_ascore(s) for s in samples))

    scores = asyncio.run(run())
    assert judge.translation_calls == 1 and judge.probe_calls == len(rows)
    assert all("[zh] Paris is the capital of France" in p for p in judge.prompts[1:])
    assert all(math.isfinite(s) for s in scores)


def test_the_translation_goes_through_the_reply_cache_so_a_rerun_pays_nothing() -> None:
    store: dict[str, Any] = {}

    class Store:
        def get(self, key: str) -> Any:
            return store.get(key)

        def set(self, key: str, value: Any) -> None:
            store[key] = value

    row = rows_of("pl", "good")[0]
    for run in range(2):
        inner = FixtureJudge(tag="[pl]")
        cached = CachedJudge(inner, Store(), "fixture")
        metric = AnswerRelevancy(llm=cached, embeddings=NgramEmbeddings(), language="polish")
        metric.score(user_input=row["user_input"], response=row["response"])
        assert inner.translation_calls == (1 if run == 0 else 0)


def test_language_must_be_auto_or_a_name() -> None:
    assert check_language(" Japanese ") == "japanese"
    for bad in ["", "ja-JP1", 3, None]:
        with pytest.raises(ValueError, match="language must be"):
            check_language(bad)
    with pytest.raises(ValueError, match="language must be"):
        AnswerRelevancy(llm=FixtureJudge(), embeddings=NgramEmbeddings(), language="12")


# --- 3. each probe's language in the report; a mismatch is flagged ------------------------------


def test_english_probes_for_a_japanese_question_are_flagged_in_the_reason() -> None:
    row = rows_of("ja", "good")[0]
    english = [(q, f) for q, f in row["stock"]]
    judge = ScriptedJudge([english[:2] + [row["ours"][0]]])
    report = (
        AnswerRelevancy(llm=judge, embeddings=NgramEmbeddings())
        .score(user_input=row["user_input"], response=row["response"])
        .report
    )
    assert report.question_language == "ja"
    assert [p.language for p in report.probes] == ["en", "en", "ja"]
    assert "2 of 3 probes are in English while the question is in Japanese" in report.reason
    table = format_report(report)
    assert table.count("[English]") == 2 and "[Japanese]" not in table
    again = RelevancyReport.from_dict(json.loads(json.dumps(report.to_dict())))
    assert again.probes == report.probes and again.question_language == "ja"


def test_probes_in_the_questions_language_add_no_clause() -> None:
    probes = [Probe("Où est ma commande ?", 0, 0.9, "fr")]
    report = RelevancyReport("Où est ma commande ?", "Elle arrive.", 0.9, 1, "diverse", False,
                             probes=probes, question_language="fr")  # fmt: skip
    assert language_clause(report) == "" and "language" not in report.reason
    unknown = RelevancyReport("?", "x", 0.9, 1, "diverse", False, probes=probes)
    assert language_clause(unknown) == ""
    english = [Probe("Where is my order?", 1, 0.1, "en")]
    evasive = RelevancyReport("Où ?", "Je ne sais pas.", 0.0, 1, "diverse", True,
                              probes=english, question_language="fr")  # fmt: skip
    assert language_clause(evasive) == ""  # score 0 by rule: the language does not matter
    evasive.all_noncommittal = False
    assert language_clause(evasive).startswith(" 1 of 1 probes is in English while")


def test_language_identification_is_right_on_the_fixture_texts() -> None:
    texts = [(r["language"], t) for r in ROWS for t in [r["user_input"], r["response"]]]
    texts += [(r["language"], q) for r in ROWS for q, _ in r["ours"]]
    texts += [("en", q) for r in ROWS for q, _ in r["stock"]]
    right = sum(detect_language(text) == code for code, text in texts)
    assert right >= 0.97 * len(texts), f"{right}/{len(texts)}"
    assert detect_language("12 345") is None
    assert py3langid.classify("Where is my order?")[0] == "en"


# --- 5. end to end on six languages -------------------------------------------------------------


@pytest.mark.parametrize("language", LANGUAGES)
def test_same_language_probes_score_good_answers_higher_than_english_probes(language) -> None:
    good = rows_of(language, "good")
    ours = AnswerRelevancy(llm=FixtureJudge("ours"), embeddings=NgramEmbeddings())
    stock = AnswerRelevancy(
        llm=FixtureJudge("stock"), embeddings=NgramEmbeddings(), probe_prompt="stock"
    )
    by_ours = [r.report for r in ours.batch_score(inputs(good))]
    by_stock = [r.report for r in stock.batch_score(inputs(good))]
    for mine, theirs in zip(by_ours, by_stock, strict=True):
        assert mine.score > theirs.score
        assert "while the question is in" not in mine.reason
        assert f"in English while the question is in {language_name_of(language)}" in (
            theirs.reason
        )


def test_every_kind_scores_in_order_and_evasive_answers_score_zero() -> None:
    metric = AnswerRelevancy(llm=FixtureJudge("ours"), embeddings=NgramEmbeddings())
    reports = {
        (r["language"], r["kind"], r["user_input"]): res.report
        for r, res in zip(ROWS, metric.batch_score(inputs(ROWS)), strict=True)
    }
    for language in LANGUAGES:
        mean = {
            kind: sum(rep.score for (lang, k, _), rep in reports.items() if (lang, k) == (
                language, kind)) / len(rows_of(language, kind))
            for kind in ("good", "partial", "off-topic", "evasive")
        }  # fmt: skip
        assert mean["good"] > mean["partial"] > mean["off-topic"] > mean["evasive"] == 0.0


def language_name_of(code: str) -> str:
    from ragas_relevancy_ext.scoring.languages import language_name

    return language_name(code)


# --- 4. the command line: --language, and each probe's language in the table and the page ------


def mixed_reports() -> list[tuple[int, RelevancyReport]]:
    """Japanese and Arabic rows probed in English (stock's prompt) and in their own language."""
    rows = rows_of("ja", "good")[:1] + rows_of("ar", "good")[:1]
    stock = AnswerRelevancy(
        llm=FixtureJudge("stock"), embeddings=NgramEmbeddings(), probe_prompt="stock"
    )
    ours = AnswerRelevancy(llm=FixtureJudge("ours"), embeddings=NgramEmbeddings())
    results = stock.batch_score(inputs(rows)) + ours.batch_score(inputs(rows))
    return [(number, result.report) for number, result in enumerate(results, 1)]


def test_table_and_page_show_a_probes_language_only_where_it_differs() -> None:
    from rich.console import Console

    from ragas_relevancy_ext.cli.output.console import print_scores
    from ragas_relevancy_ext.cli.output.html import render_html
    from ragas_relevancy_ext.cli.stats import summarise

    items = mixed_reports()
    console = Console(file=io.StringIO(), width=200)
    print_scores(console, items)
    text = console.file.getvalue()
    assert text.count("[English]") == 6  # 3 English probes on each of the 2 stock rows
    summary = summarise([(n, r.score, r.user_input) for n, r in items])
    page = render_html(items, summary, {"file": "multilingual"})
    assert page.count("in English</span>") == 6
    assert 'dir="auto">كيف يمكنني تتبع طلبي؟<' in page  # right-to-left text keeps its direction
    assert "注文した商品がまだ届きません" in page


def test_cli_language_option_reaches_the_metric_and_a_bad_one_is_a_usage_error(tmp_path) -> None:
    from typer.testing import CliRunner

    from ragas_relevancy_ext.cli import app

    path = tmp_path / "rows.jsonl"
    path.write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in inputs(rows_of("fr"))),
        encoding="utf-8",
    )
    ok = CliRunner().invoke(app, ["score", str(path), "--embeddings", "hash", "--no-progress"])
    assert ok.exit_code == 0, ok.output
    assert "language auto" in ok.stdout
    bad = CliRunner().invoke(app, ["score", str(path), "--embeddings", "hash", "--language", "1"])
    assert bad.exit_code == 2 and "--language" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("probe_prompt", ["diverse", "stock"])
def test_cli_named_language_translates_once_and_the_cache_keeps_it(tmp_path, probe_prompt) -> None:
    from typer.testing import CliRunner

    from ragas_relevancy_ext.cli import app

    path = tmp_path / "rows.jsonl"
    path.write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in inputs(rows_of("de"))),
        encoding="utf-8",
    )
    args = ["score", str(path), "--embeddings", "hash", "--no-progress", "--strictness", "1"]
    args += ["--probe-prompt", probe_prompt, "--language", "german", "--cache", str(tmp_path)]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    rows = len(rows_of("de"))
    assert f"0 replies reused, {rows + 1} judge calls" in first.stdout  # one translation
    again = CliRunner().invoke(app, args)
    assert f"{rows + 1} replies reused, 0 judge calls" in again.stdout


@pytest.mark.slow
def test_language_identification_stays_off_the_help_path() -> None:
    import os
    import subprocess
    import sys

    command = [sys.executable, "-X", "importtime", "-m", "ragas_relevancy_ext", "score", "--help"]
    root = ROOT
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=root, env=dict(os.environ), timeout=120
    )
    assert done.returncode == 0, done.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "ragas_relevancy_ext.cli.options" in imported  # the check sees the package's imports
    assert not {m for m in imported if m.split(".")[0] == "py3langid"}
    assert "--language" in done.stdout


def test_evaluate_with_a_langchain_judge_adapts_the_legacy_prompt_once() -> None:
    from ragas import EvaluationDataset, evaluate
    from ragas.embeddings.base import LangchainEmbeddingsWrapper
    from ragas.llms.base import LangchainLLMWrapper

    from ragas_relevancy_ext import report_for
    from ragas_relevancy_ext.testing.offline import LangchainHashEmbeddings, PretendChatModel

    chat = PretendChatModel()
    rows = inputs(rows_of("fr"))
    metric = ResponseRelevancy(language="french", strictness=2)
    result = evaluate(
        EvaluationDataset.from_list(rows),
        metrics=[metric],
        llm=LangchainLLMWrapper(chat),
        embeddings=LangchainEmbeddingsWrapper(LangchainHashEmbeddings()),
        show_progress=False,
    )
    translations = [p for p in chat.prompts if "statements" in p.lower()]
    assert len(translations) == 1 and len(chat.prompts) == 1 + len(rows)
    assert all(report_for(result, i).probe_prompt == "diverse (french)" for i in range(len(rows)))


# --- one translation per metric and language, across calls ----------------------------------

ORDERS = [
    {"user_input": f"Where is order A{i}?", "response": f"Order A{i} shipped on Monday."}
    for i in range(6)
]


def _legacy_evaluate(rows: list[dict[str, str]], judge: Any) -> Any:
    metric = ResponseRelevancy(language="spanish")
    dataset = EvaluationDataset.from_list(rows)
    embeddings = HashEmbeddings()
    return evaluate(dataset, [metric], llm=judge, embeddings=embeddings, show_progress=False)


def test_a_named_language_is_translated_once_per_legacy_metric_in_evaluate() -> None:
    once, many = TranslationCounter(), TranslationCounter()
    _legacy_evaluate(ORDERS[:1], once)
    result = _legacy_evaluate(ORDERS[:3], many)
    assert once.translations > 0
    assert many.translations == once.translations
    assert report_for(result, 0).probe_prompt == "diverse (spanish)"


def test_a_named_language_is_translated_once_per_metric_across_scores() -> None:
    once = TranslationCounter()
    AnswerRelevancy(llm=once, embeddings=HashEmbeddings(), language="spanish").score(**ORDERS[0])
    assert once.translations > 0
    judge = TranslationCounter()
    metric = AnswerRelevancy(llm=judge, embeddings=HashEmbeddings(), language="spanish")
    first = metric.score(**ORDERS[0])
    metric.score(**ORDERS[1])
    assert judge.translations == once.translations
    assert first.report.probe_prompt == "diverse (spanish)"


def test_a_named_language_is_translated_once_per_metric_across_batches() -> None:
    once = TranslationCounter()
    metric = AnswerRelevancy(llm=once, embeddings=HashEmbeddings(), language="spanish")
    metric.batch_score(ORDERS[:1])
    judge = TranslationCounter()
    metric = AnswerRelevancy(llm=judge, embeddings=HashEmbeddings(), language="spanish")
    metric.batch_score(ORDERS[:3])
    metric.batch_score(ORDERS[3:])
    assert judge.translations == once.translations > 0
