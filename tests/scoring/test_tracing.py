"""OpenTelemetry spans, read back from the SDK's in-memory exporter: a sample's span under the
caller's, its judge and embeddings spans under it (GenAI conventions), one event per probe,
the cause of a NaN, both flavours (``ragas.evaluate`` too), texts only when opted in, no key."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from ragas_relevancy_ext import AnswerRelevancy, ResponseRelevancy
from ragas_relevancy_ext.scoring import tracing
from ragas_relevancy_ext.scoring.sample import ProbeOptions, score_sample
from ragas_relevancy_ext.scoring.tracing import CAPTURE_CONTENT, PROBE_EVENT, SAMPLE_SPAN
from ragas_relevancy_ext.testing.offline import (
    HashEmbeddings,
    LangchainHashEmbeddings,
    PretendChatModel,
    PretendJudge,
    ScriptedJudge,
)

QUESTION = "Where is order A17 now?"
ANSWER = "Order A17 left the Leeds depot on 3 March. It arrives on Friday."
KEY = "sk-test-0123456789abcdef"  # a key the spans must never hold


class NamedJudge(PretendJudge):
    """PretendJudge named as instructor's judges are (``model``, ``provider``)."""

    model = "gpt-4o-mini"
    provider = "openai"


class NamedEmbeddings(HashEmbeddings):
    """HashEmbeddings named as RAGAS's OpenAIEmbeddings is (``model``)."""

    model = "text-embedding-3-small"


class ShortEmbeddings(HashEmbeddings):
    """Answers a list of texts with one vector: the sample fails in the embeddings."""

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        return [self.embed_text(texts[0])]


def by_name(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def children(exporter: InMemorySpanExporter, parent: ReadableSpan) -> list[ReadableSpan]:
    return [
        s
        for s in exporter.get_finished_spans()
        if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]


def every_text(exporter: InMemorySpanExporter) -> str:
    """Every attribute, event attribute and status description of every span, as one text."""
    parts = []
    for span in exporter.get_finished_spans():
        parts.append(json.dumps(dict(span.attributes or {}), default=str))
        parts.extend(json.dumps(dict(e.attributes or {}), default=str) for e in span.events)
        parts.append(span.status.description or "")
    return "\n".join(parts)


def test_nothing_is_traced_without_a_tracer_provider(monkeypatch):
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert tracing.tracer() is None and tracing.span_context() is None

    def no_span(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a span was started with no tracer provider")

    for name in ("span", "sample_span", "_client_span", "start_span", "attached_context"):
        monkeypatch.setattr(tracing, name, no_span)
    metric = AnswerRelevancy(llm=PretendJudge(), embeddings=HashEmbeddings())
    assert math.isfinite(metric.score(user_input=QUESTION, response=ANSWER).value)
    results = metric.batch_score([{"user_input": QUESTION, "response": ANSWER}] * 3)
    assert all(math.isfinite(r.value) for r in results)


def test_a_scored_sample_is_a_span_under_the_callers_with_its_calls_and_probes(spans):
    metric = AnswerRelevancy(llm=NamedJudge(), embeddings=NamedEmbeddings(), strictness=3)
    with trace.get_tracer("my app").start_as_current_span("my request") as mine:
        report = metric.score(user_input=QUESTION, response=ANSWER).report

    (sample,) = by_name(spans, SAMPLE_SPAN)
    assert sample.parent.span_id == mine.get_span_context().span_id
    attributes = sample.attributes
    assert attributes["ragas_relevancy.score"] == pytest.approx(report.score)
    assert attributes["ragas_relevancy.strictness"] == 3
    assert attributes["ragas_relevancy.probe_mode"] == "diverse"
    assert attributes["ragas_relevancy.probe_similarity"] == pytest.approx(report.probe_similarity)
    assert attributes["ragas_relevancy.judge_calls"] == 1
    assert attributes["ragas_relevancy.usage.embedding_requests"] == 2
    assert "ragas_relevancy.cause" not in attributes and sample.status.is_ok
    probes = [e for e in sample.events if e.name == PROBE_EVENT]
    assert [e.attributes["ragas_relevancy.probe.cosine"] for e in probes] == pytest.approx(
        [p.cosine for p in report.probes]
    )
    assert [e.attributes["ragas_relevancy.probe.noncommittal"] for e in probes] == [False] * 3

    calls = children(spans, sample)
    assert sorted(s.name for s in calls) == [
        "chat gpt-4o-mini",
        "embeddings text-embedding-3-small",
        "embeddings text-embedding-3-small",
    ]
    (chat,) = [s for s in calls if s.name.startswith("chat")]
    assert chat.kind is trace.SpanKind.CLIENT
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    embedded = sorted(s.attributes["ragas_relevancy.vectors"] for s in calls if s is not chat)
    assert embedded == [1, 3]  # the question, then the probes
    # no text was recorded: the opt-in variable is not set
    assert QUESTION not in every_text(spans) and "Leeds" not in every_text(spans)
    assert not any("question" in k for e in probes for k in e.attributes)


def test_texts_are_recorded_only_when_opted_in(spans, monkeypatch):
    monkeypatch.setenv(CAPTURE_CONTENT, "true")
    metric = AnswerRelevancy(llm=NamedJudge(), embeddings=HashEmbeddings())
    report = metric.score(user_input=QUESTION, response=ANSWER).report
    (sample,) = by_name(spans, SAMPLE_SPAN)
    assert sample.attributes["ragas_relevancy.user_input"] == QUESTION
    assert sample.attributes["ragas_relevancy.response"] == ANSWER
    asked = [
        e.attributes["ragas_relevancy.probe.question"]
        for e in sample.events
        if e.name == PROBE_EVENT
    ]
    assert asked == [p.question for p in report.probes]
    (chat,) = by_name(spans, "chat")
    sent = json.loads(chat.attributes["gen_ai.input.messages"])
    assert sent[0]["role"] == "user" and ANSWER in sent[0]["parts"][0]["content"]
    answered = json.loads(chat.attributes["gen_ai.output.messages"])
    assert report.probes[0].question in answered[0]["parts"][0]["content"]


def test_a_sample_that_fails_is_an_error_span_with_its_cause_and_no_key(spans, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    refused = RuntimeError(f"Error code: 401 - Incorrect API key provided: {KEY}")
    metric = AnswerRelevancy(llm=ScriptedJudge([refused]), embeddings=HashEmbeddings())
    (result,) = metric.batch_score([{"user_input": QUESTION, "response": ANSWER}])
    assert math.isnan(result.value)

    (sample,) = by_name(spans, SAMPLE_SPAN)
    assert sample.status.status_code is StatusCode.ERROR
    assert sample.attributes["ragas_relevancy.cause"] == str(result.report.cause)
    assert sample.attributes["error.type"] == "RuntimeError"
    assert "ragas_relevancy.score" not in sample.attributes
    (chat,) = children(spans, sample)
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.attributes["error.type"] == "RuntimeError"
    (event,) = chat.events
    assert event.name == "exception"
    assert "Incorrect API key" in event.attributes["exception.message"]
    assert KEY not in every_text(spans)


def test_a_nan_without_an_exception_says_why_and_each_failed_call_is_an_error(spans):
    unreadable = ["not json at all"] * 3  # the first call and both calls asked again
    metric = AnswerRelevancy(llm=ScriptedJudge(unreadable), embeddings=HashEmbeddings())
    report = metric.score(user_input=QUESTION, response=ANSWER).report
    assert math.isnan(report.score) and str(report.cause) == "no_usable_probe"

    (sample,) = by_name(spans, SAMPLE_SPAN)
    assert sample.attributes["ragas_relevancy.cause"] == "no_usable_probe"
    assert sample.attributes["ragas_relevancy.judge_calls"] == 3
    assert sample.status.status_code is StatusCode.ERROR
    calls = children(spans, sample)
    assert len(calls) == 3 and all(c.status.status_code is StatusCode.ERROR for c in calls)
    assert not by_name(spans, "embeddings")  # nothing to embed


def test_an_embeddings_failure_is_the_embeddings_span_s_error(spans):
    metric = AnswerRelevancy(llm=PretendJudge(), embeddings=ShortEmbeddings())
    (result,) = metric.batch_score([{"user_input": QUESTION, "response": ANSWER}])
    (sample,) = by_name(spans, SAMPLE_SPAN)
    assert sample.attributes["ragas_relevancy.cause"] == "embeddings_error" == result.report.cause
    assert sample.attributes["error.type"] == "ragas_relevancy_ext.errors.EmbeddingShapeError"


def test_a_shared_embeddings_request_sits_under_one_sample_and_links_the_others(spans):
    rows = [
        {"user_input": QUESTION, "response": ANSWER},
        {"user_input": "Can I return a blender?", "response": "Yes, within 30 days, unused."},
    ]
    metric = AnswerRelevancy(llm=PretendJudge(), embeddings=HashEmbeddings())
    metric.batch_score(rows)
    samples = {s.context.span_id: s for s in by_name(spans, SAMPLE_SPAN)}
    requests = by_name(spans, "embeddings")
    assert len(samples) == 2 and len(requests) == 2  # questions in one request, probes in one
    for request in requests:
        assert request.attributes["ragas_relevancy.samples"] == 2
        linked = {link.context.span_id for link in request.links}
        assert {request.parent.span_id, *linked} == set(samples)


def test_inside_ragas_evaluate_each_row_is_a_span_under_the_callers(spans):
    from ragas import EvaluationDataset, evaluate
    from ragas.embeddings.base import LangchainEmbeddingsWrapper
    from ragas.llms.base import LangchainLLMWrapper

    rows = [
        {"user_input": QUESTION, "response": ANSWER},
        {"user_input": "Do you ship to Norway?", "response": "We ship to Norway in 5 days."},
    ]
    metric = ResponseRelevancy(
        llm=LangchainLLMWrapper(PretendChatModel()),
        embeddings=LangchainEmbeddingsWrapper(LangchainHashEmbeddings()),
    )
    with trace.get_tracer("my app").start_as_current_span("my evaluation") as mine:
        result = evaluate(EvaluationDataset.from_list(rows), metrics=[metric], show_progress=False)
    samples = by_name(spans, SAMPLE_SPAN)
    assert len(samples) == 2
    assert {s.parent.span_id for s in samples} == {mine.get_span_context().span_id}
    scores = sorted(s.attributes["ragas_relevancy.score"] for s in samples)
    assert scores == pytest.approx(sorted(result.to_pandas()["answer_relevancy"]))
    assert all(s.attributes["ragas_relevancy.probe_mode"] == "diverse" for s in samples)
    requests = by_name(spans, "embeddings ")
    for sample in samples:  # its own judge calls; embeddings shared by the run's rows
        assert any(c.name.startswith("chat ") for c in children(spans, sample))
        mine = sample.context.span_id
        assert any(
            r.parent.span_id == mine or mine in {link.context.span_id for link in r.links}
            for r in requests
        )


def test_rows_of_a_batch_go_under_the_spans_their_caller_gave_them(spans):
    tracer = trace.get_tracer("my app")
    parents = [tracer.start_span(f"check {i}") for i in range(3)]
    contexts = [trace.set_span_in_context(p) for p in parents]
    rows = [{"user_input": f"{QUESTION} ({i})", "response": ANSWER} for i in range(3)]
    metric = AnswerRelevancy(llm=PretendJudge(), embeddings=HashEmbeddings())

    async def batch() -> None:
        with tracing.row_parents(contexts):
            await metric.abatch_score(rows)

    asyncio.run(batch())
    for parent in parents:
        parent.end()
    by_parent = {s.parent.span_id: s for s in by_name(spans, SAMPLE_SPAN)}
    assert set(by_parent) == {p.get_span_context().span_id for p in parents}


def test_a_sample_span_names_the_sample_its_settings_and_its_score(
    spans: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter = spans
    monkeypatch.setenv(CAPTURE_CONTENT, "true")
    options = ProbeOptions.resolve(2, "diverse")
    question, answer = "How long do refunds take?", "Refunds take five days."
    report = asyncio.run(
        score_sample(
            question, answer, llm=PretendJudge(), embeddings=HashEmbeddings(), options=options
        )
    )
    (span,) = [s for s in exporter.get_finished_spans() if s.name == SAMPLE_SPAN]
    attributes = span.attributes
    assert attributes["ragas_relevancy.strictness"] == 2
    assert attributes["ragas_relevancy.probe_mode"] == "diverse"
    assert attributes["ragas_relevancy.probe_prompt"] == options.prompt_name
    assert attributes["ragas_relevancy.user_input"] == question
    assert attributes["ragas_relevancy.response"] == answer
    assert attributes["ragas_relevancy.score"] == pytest.approx(report.score)
    assert attributes["ragas_relevancy.probes"] == 2
