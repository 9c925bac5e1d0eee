"""Traces beside the official OpenTelemetry GenAI instrumentation
(``opentelemetry-instrumentation-openai-v2``), on the real SDKs against the loopback server, with
the user's own ``AsyncOpenAI`` client as the README builds it: with the official instrumentation
on, each request is one span (the official one, under the sample's span) and usage is counted
once; without it, the package's spans carry what the official ones carry. Texts follow the
official capture switches."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from openai import AsyncOpenAI
from opentelemetry import trace
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from ragas.embeddings import OpenAIEmbeddings
from ragas.llms import llm_factory

from ragas_relevancy_ext import AnswerRelevancy, Usage
from ragas_relevancy_ext.scoring.tracing import CAPTURE_CONTENT, OPT_IN, PROBE_EVENT, SAMPLE_SPAN
from ragas_relevancy_ext.testing.loopback import Fault, LoopbackServer, pretend_reply

KEY = "sk-test-0123456789abcdef"  # a key the spans must never hold
ROWS = [
    {"user_input": "Where is order A17 now", "response": "Order A17 left the Leeds depot today."},
    {"user_input": "Can I return a blender", "response": "Yes, within 30 days and unused."},
    {"user_input": "Do you ship to Norway", "response": "We ship to Norway in five days."},
]
# What the official instrumentation records on the spans of these calls (instructor's JSON mode
# through llm_factory; RAGAS's OpenAIEmbeddings); server.* only with an openai SDK whose URL type
# it reads (before openai 3)
OFFICIAL_CHAT = {
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "server.address",
    "server.port",
    "gen_ai.request.temperature",
    "gen_ai.request.max_tokens",
    "gen_ai.request.top_p",
    "gen_ai.output.type",
    "gen_ai.response.id",
    "gen_ai.response.model",
    "gen_ai.response.finish_reasons",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
}
OFFICIAL_EMBEDDINGS = {
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "server.address",
    "server.port",
    "gen_ai.response.model",
    "gen_ai.embeddings.dimension.count",
    "gen_ai.usage.input_tokens",
}
LATEST = "gen_ai_latest_experimental"


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(width=32) as running:
        yield running


@pytest.fixture
def provider(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The user's tracer provider (set as ``trace.set_tracer_provider`` sets it), its spans kept
    in memory (``provider.spans``); texts not opted in; the server's log and faults cleared."""
    server.reset()
    server.faults, server.reply = [], None
    monkeypatch.delenv(CAPTURE_CONTENT, raising=False)
    monkeypatch.delenv(OPT_IN, raising=False)
    tracer_provider = TracerProvider()
    tracer_provider.spans = InMemorySpanExporter()
    tracer_provider.add_span_processor(SimpleSpanProcessor(tracer_provider.spans))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", tracer_provider)
    yield tracer_provider
    tracer_provider.shutdown()


def instrumented(provider: Any) -> Any:
    """The official instrumentation, on (before the clients are built, as its docs say)."""
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor


def metric_on(server: LoopbackServer, **kwargs: Any) -> AnswerRelevancy:
    """The README's set-up: the user's own AsyncOpenAI for the judge and the embeddings."""
    client = AsyncOpenAI(base_url=server.openai_base_url, api_key=KEY, max_retries=0)
    return AnswerRelevancy(
        llm=llm_factory("loop-judge", provider="openai", client=client),
        embeddings=OpenAIEmbeddings(client=client, model="loop-embed"),
        **kwargs,
    )


def operation(provider: Any, name: str) -> list[ReadableSpan]:
    spans = provider.spans.get_finished_spans()
    return [s for s in spans if (s.attributes or {}).get("gen_ai.operation.name") == name]


def tokens(spans: list[ReadableSpan], kind: str) -> int:
    return sum(s.attributes.get(f"gen_ai.usage.{kind}_tokens", 0) for s in spans)


@pytest.mark.slow
def test_beside_the_official_instrumentation_each_request_is_one_span_billed_once(
    server: LoopbackServer, provider: Any
) -> None:
    replies: list[str] = []

    def first_unreadable(messages: list[dict[str, Any]]) -> str:
        """The first reply is not JSON: instructor asks again (one request more, in the same
        judge call), and is answered to the prompt it first sent."""
        prompt = [m for m in messages if m["role"] == "user"][:1]
        replies.append("not json at all" if not replies else pretend_reply(prompt))
        return replies[-1]

    server.reply = first_unreadable
    instrumentor = instrumented(provider)
    try:
        results = metric_on(server).batch_score(ROWS)
    finally:
        instrumentor.uninstrument()

    chats, embeddings = operation(provider, "chat"), operation(provider, "embeddings")
    assert len(chats) == server.count("chat") == len(ROWS) + 1  # one asked again by instructor
    assert len(embeddings) == server.count("embeddings") >= 2
    assert {s.instrumentation_scope.name for s in chats + embeddings}.isdisjoint(
        {"ragas_relevancy_ext"}
    )
    samples = [s for s in provider.spans.get_finished_spans() if s.name == SAMPLE_SPAN]
    assert len(samples) == len(ROWS)
    assert {s.parent.span_id for s in chats + embeddings} <= {s.context.span_id for s in samples}
    assert all(len([e for e in s.events if e.name == PROBE_EVENT]) == 3 for s in samples)
    chat_bill, embeddings_bill = server.usage("chat"), server.usage("embeddings")
    assert tokens(chats, "input") == chat_bill["prompt_tokens"] > 0
    assert tokens(chats, "output") == chat_bill["completion_tokens"] > 0
    assert tokens(embeddings, "input") == embeddings_bill["prompt_tokens"] > 0
    # the reports count the same, the embeddings' tokens read from the user's own client
    usage = Usage.total(r.report.usage for r in results)
    assert (usage.judge_prompt_tokens, usage.judge_completion_tokens) == (
        chat_bill["prompt_tokens"],
        chat_bill["completion_tokens"],
    )
    assert usage.embedding_tokens == embeddings_bill["prompt_tokens"]
    # what the installed official instrumentation records is what the lists below say
    assert all(set(s.attributes) <= OFFICIAL_CHAT for s in chats)
    assert all(set(s.attributes) <= OFFICIAL_EMBEDDINGS for s in embeddings)


@pytest.mark.slow
def test_without_it_the_package_s_spans_carry_the_official_attributes_key_for_key(
    server: LoopbackServer, provider: Any
) -> None:
    results = metric_on(server).batch_score(ROWS)

    chats, embeddings = operation(provider, "chat"), operation(provider, "embeddings")
    assert len(chats) == server.count("chat") == len(ROWS)
    assert len(embeddings) == server.count("embeddings") >= 2
    for spans, official in ((chats, OFFICIAL_CHAT), (embeddings, OFFICIAL_EMBEDDINGS)):
        for span in spans:
            own = set(span.attributes) - official
            assert official <= set(span.attributes), official - set(span.attributes)
            assert own and all(key.startswith("ragas_relevancy.") for key in own), own
    chat = chats[0].attributes
    assert (chat["gen_ai.provider.name"], chat["gen_ai.response.model"]) == ("openai", "loop-judge")
    assert chat["server.port"] == server.port
    sent = server.requests("chat")[0].body
    assert chat["gen_ai.request.temperature"] == sent["temperature"]
    assert chat["gen_ai.request.max_tokens"] == sent["max_tokens"]
    assert chat["gen_ai.request.top_p"] == sent["top_p"]
    assert list(chat["gen_ai.response.finish_reasons"]) == ["stop"]
    assert all(s.attributes["gen_ai.response.model"] == "loop-embed" for s in embeddings)
    chat_bill, embeddings_bill = server.usage("chat"), server.usage("embeddings")
    assert tokens(chats, "input") == chat_bill["prompt_tokens"] > 0
    assert tokens(chats, "output") == chat_bill["completion_tokens"] > 0
    assert tokens(embeddings, "input") == embeddings_bill["prompt_tokens"] > 0
    assert (
        Usage.total(r.report.usage for r in results).embedding_tokens
        == (embeddings_bill["prompt_tokens"])
    )


@pytest.mark.slow
def test_a_refused_key_is_the_provider_s_error_on_the_spans_and_never_the_key(
    server: LoopbackServer, provider: Any
) -> None:
    server.faults = [Fault("unauthorized", fraction=1.0, endpoint="chat")]
    (result,) = metric_on(server).batch_score(ROWS[:1])
    assert str(result.report.cause) == "auth"

    (chat,) = operation(provider, "chat")
    (sample,) = [s for s in provider.spans.get_finished_spans() if s.name == SAMPLE_SPAN]
    assert chat.attributes["error.type"] == "openai.AuthenticationError"  # not instructor's
    assert sample.attributes["error.type"] == "openai.AuthenticationError"
    recorded = [json.dumps(dict(s.attributes), default=str) for s in (chat, sample)]
    recorded += [json.dumps(dict(e.attributes), default=str) for e in chat.events + sample.events]
    assert KEY not in "".join(recorded)


def texts(spans: list[ReadableSpan]) -> tuple[str, str]:
    """Every text on span attributes, and every text in span events (the JSON of messages
    opened), each as one string."""

    def opened(values: Any) -> list[str]:
        found = []
        for key, value in values.items():
            found.append(str(value))
            if key.endswith(".messages"):
                found += [p.get("content", "") for m in json.loads(value) for p in m["parts"]]
        return found

    on_spans = [t for s in spans for t in opened(s.attributes or {})]
    in_events = [t for s in spans for e in s.events for t in opened(e.attributes or {})]
    return "\n".join(on_spans), "\n".join(in_events)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("variables", "on_spans", "in_events"),
    [
        ({}, False, False),
        ({CAPTURE_CONTENT: "true"}, True, True),  # the older switch
        ({CAPTURE_CONTENT: "false"}, False, False),
        ({CAPTURE_CONTENT: "SPAN_ONLY"}, False, False),  # the newer modes need the opt-in
        ({OPT_IN: LATEST, CAPTURE_CONTENT: "SPAN_ONLY"}, True, False),
        ({OPT_IN: LATEST, CAPTURE_CONTENT: "EVENT_ONLY"}, False, True),
        ({OPT_IN: LATEST, CAPTURE_CONTENT: "SPAN_AND_EVENT"}, True, True),
        ({OPT_IN: LATEST, CAPTURE_CONTENT: "NO_CONTENT"}, False, False),
        ({OPT_IN: LATEST, CAPTURE_CONTENT: "true"}, False, False),  # not a mode: none
        ({OPT_IN: f"http, {LATEST}", CAPTURE_CONTENT: "span_only"}, True, False),
    ],
)
def test_texts_appear_under_each_official_setting_that_asks_for_them_and_no_other(
    server: LoopbackServer,
    provider: Any,
    monkeypatch: pytest.MonkeyPatch,
    variables: dict[str, str],
    on_spans: bool,
    in_events: bool,
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    report = metric_on(server).score(**ROWS[0]).report
    system = [m for m in server.requests("chat")[0].body["messages"] if m["role"] == "system"]
    assert system  # instructor's own message, sent before the prompt

    spans_text, events_text = texts(provider.spans.get_finished_spans())
    asked = [ROWS[0]["user_input"], ROWS[0]["response"], report.probes[0].question]
    for text in [*asked, system[0]["content"]]:
        assert (text in spans_text, text in events_text) == (on_spans, in_events), text


@pytest.mark.slow
def test_the_messages_recorded_are_the_ones_sent_as_the_official_instrumentation_records_them(
    server: LoopbackServer, provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(OPT_IN, LATEST)
    monkeypatch.setenv(CAPTURE_CONTENT, "SPAN_ONLY")

    def messages(span: ReadableSpan) -> list[Any]:
        return [
            (m["role"], [p.get("content") for p in m["parts"]])
            for key in ("gen_ai.input.messages", "gen_ai.output.messages")
            for m in json.loads(span.attributes[key])
        ]

    instrumentor = instrumented(provider)
    try:
        metric_on(server).score(**ROWS[0])
    finally:
        instrumentor.uninstrument()
    (official,) = operation(provider, "chat")
    provider.spans.clear()
    metric_on(server).score(**ROWS[0])
    (ours,) = operation(provider, "chat")
    assert ours.instrumentation_scope.name == "ragas_relevancy_ext"
    assert messages(ours) == messages(official)
    assert [role for role, _ in messages(ours)] == ["system", "user", "assistant"]
