"""One sample's checks, options and failure (``scoring/sample.py``): inputs named by their type,
the options' defaults and labels, the ``rate_limits`` check, every field of a failed report."""

from __future__ import annotations

import asyncio
import math

import pytest
from ragas.metrics._answer_relevance import ResponseRelevancePrompt as LegacyStockPrompt
from ragas.metrics.collections.answer_relevancy.util import (
    AnswerRelevancePrompt as ModernStockPrompt,
)

from ragas_relevancy_ext import AnswerRelevancy
from ragas_relevancy_ext.errors import Cause, EmbeddingCallError
from ragas_relevancy_ext.scoring.sample import (
    ProbeOptions,
    check_inputs,
    check_option,
    failed_report,
    score_sample,
)
from ragas_relevancy_ext.scoring.usage import Usage
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge


@pytest.mark.parametrize(("user_input", "named"), [(5, "int"), (None, "NoneType")])
def test_a_field_that_is_not_text_is_named_with_its_type(user_input: object, named: str) -> None:
    with pytest.raises(TypeError, match=f"^user_input must be a string, got {named}$"):
        check_inputs(user_input, "Because.")


def test_a_named_language_without_the_metrics_store_still_scores() -> None:
    options = ProbeOptions.resolve(3, "diverse", language="english")
    report = asyncio.run(
        score_sample(
            "How long do refunds take?",
            "Refunds take five days.",
            llm=PretendJudge(),
            embeddings=HashEmbeddings(),
            options=options,
        )
    )
    assert math.isfinite(report.score) and report.error is None


@pytest.mark.parametrize("value", [5, "fast", {"embedding_tpm": 1000}])
def test_rate_limits_that_are_not_rate_limits_are_refused_by_name(value: object) -> None:
    with pytest.raises(ValueError, match=r"^rate_limits must be a RateLimits or None, got "):
        AnswerRelevancy(PretendJudge(), HashEmbeddings(), rate_limits=value)
    assert check_option("rate_limits", None) is None


def test_options_resolve_stock_s_modern_prompt_unless_asked_for_legacy_s() -> None:
    modern = ProbeOptions.resolve(3, "stock")
    legacy = ProbeOptions.resolve(3, "stock", legacy=True)
    assert type(modern.prompt) is ModernStockPrompt
    assert type(legacy.prompt) is LegacyStockPrompt
    assert modern.batch_embeddings is True and legacy.batch_embeddings is True


def test_a_prompt_already_in_the_language_asked_for_is_labelled_without_it() -> None:
    prompt = ProbeOptions.resolve(3, "diverse").prompt
    prompt.language = "spanish"
    plain = ProbeOptions.resolve(3, prompt).prompt_name
    assert ProbeOptions.resolve(3, prompt, language="spanish").prompt_name == plain
    assert ProbeOptions.resolve(3, prompt, language="french").prompt_name == f"{plain} (french)"


# --- every field of a failed sample's report ----------------------------------------------


def test_a_failed_report_keeps_the_sample_and_its_settings_and_is_nan() -> None:
    usage = Usage(judge_requests=2, judge_prompt_tokens=30, judge_completion_tokens=5)
    report = failed_report("Why?", "Because.", 4, "angles", ConnectionError("line dropped"), usage)
    assert report.user_input == "Why?" and report.response == "Because."
    assert math.isnan(report.score)
    assert report.strictness == 4
    assert report.probe_prompt == "angles"
    assert report.all_noncommittal is False
    assert report.usage is usage
    assert report.cause is Cause.UNREACHABLE
    assert report.error == "ConnectionError: line dropped"
    assert report.reason == (
        "Not scored (unreachable): the judge could not be reached: ConnectionError: line dropped"
    )
    assert report.probes == [] and report.judge_calls == 0


def test_a_failed_report_of_fields_that_are_not_text_shows_them_as_their_repr() -> None:
    report = failed_report(["a", "list"], 7, 3, "diverse", ValueError("bad"))
    assert report.user_input == "['a', 'list']"
    assert report.response == "7"
    assert report.usage is None
    assert report.to_dict()["score"] is None  # NaN is written as "not measured"


def test_a_failed_report_masks_the_api_key_a_failure_quotes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = "sk-test-0123456789abcdef0123"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    report = failed_report("Why?", "Because.", 3, "diverse", RuntimeError(f"bad key {key}"))
    assert key not in report.error and key not in report.reason
    assert report.error.startswith("RuntimeError: bad key ")


def test_a_failure_raised_through_the_embeddings_is_said_of_the_embeddings() -> None:
    exc = ConnectionError("connection refused")
    exc.__cause__ = EmbeddingCallError("text 2 of 3 failed", 1)
    report = failed_report("Why?", "Because.", 3, "diverse", exc)
    assert report.cause is Cause.UNREACHABLE
    assert report.reason.startswith("Not scored (unreachable): the embeddings ")
    assert "judge" not in report.reason
