"""The plugin's spans: one per check, under the span current in the test that made it, its
sample's span inside; ``--relevancy-otel URL`` sends them over OTLP/HTTP."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest
from common import OtlpReceiver
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http import trace_exporter  # noqa: F401  (see below)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import ragas_relevancy_ext.cli.setup  # noqa: F401  (see below)
from ragas_relevancy_ext import AnswerRelevancy
from ragas_relevancy_ext.pytest_plugin.checks import CHECK_SPAN
from ragas_relevancy_ext.scoring.tracing import SAMPLE_SPAN
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge

# Inner sessions run in this process and unload the modules they imported; numpy cannot load
# twice in one process, so what scoring and the exporter need is loaded here, once.
AnswerRelevancy(llm=PretendJudge(), embeddings=HashEmbeddings()).score(
    user_input="a?", response="b."
)

QUESTION = "How do I get a refund for a damaged blender?"
GOOD = "Refunds for damaged blenders are issued once we receive a photo of the damage."
BAD = "Our blenders come in three colours: red, black and white."
OFFLINE = ("--relevancy-judge", "offline", "--relevancy-embeddings", "hash")
TESTS = f"""
    from opentelemetry import trace
    from ragas_relevancy_ext.pytest_plugin import assert_relevant

    QUESTION, GOOD, BAD = {QUESTION!r}, {GOOD!r}, {BAD!r}
    TRACER = trace.get_tracer("the suite")

    def test_good(relevancy):  # the fixture
        with TRACER.start_as_current_span("my test_good"):
            relevancy(QUESTION, GOOD, min_score=0.1)

    def test_bad():  # assert_relevant
        with TRACER.start_as_current_span("my test_bad"):
            assert_relevant(QUESTION, BAD, min_score=0.99)
"""


@pytest.fixture(autouse=True)
def inner_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:cacheprovider -p no:unraisableexception")


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The suite's own tracer provider (as ``trace.set_tracer_provider`` sets it, undone after)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    yield exporter
    provider.shutdown()


@pytest.mark.slow
def test_each_check_is_a_span_under_its_test_s_span_holding_its_sample(pytester, spans):
    pytester.makepyfile(test_bot=textwrap.dedent(TESTS))
    result = pytester.runpytest(*OFFLINE)
    result.assert_outcomes(passed=1, failed=1)

    finished = spans.get_finished_spans()
    mine = {s.name: s for s in finished if s.name.startswith("my ")}
    checks = {
        s.attributes["ragas_relevancy.check.test"]: s for s in finished if s.name == CHECK_SPAN
    }
    assert sorted(checks) == ["test_bot.py::test_bad", "test_bot.py::test_good"]
    good, bad = checks["test_bot.py::test_good"], checks["test_bot.py::test_bad"]
    assert good.parent.span_id == mine["my test_good"].context.span_id
    assert bad.parent.span_id == mine["my test_bad"].context.span_id
    assert good.attributes["ragas_relevancy.check.verdict"] == "passed" and good.status.is_ok
    assert bad.attributes["ragas_relevancy.check.verdict"] == "below"
    assert bad.attributes["ragas_relevancy.check.min_score"] == 0.99
    assert bad.status.status_code is StatusCode.ERROR
    samples = {s.parent.span_id: s for s in finished if s.name == SAMPLE_SPAN}
    assert set(samples) == {good.context.span_id, bad.context.span_id}
    for check in (good, bad):
        score = samples[check.context.span_id].attributes["ragas_relevancy.score"]
        assert check.attributes["ragas_relevancy.score"] == score


@pytest.mark.slow
def test_relevancy_otel_sends_the_checks_spans(pytester):
    pytester.makepyfile(test_bot=textwrap.dedent(TESTS))
    with OtlpReceiver() as received:
        result = pytester.runpytest(*OFFLINE, "--relevancy-otel", received.url)
        result.assert_outcomes(passed=1, failed=1)
        checks = received.named(CHECK_SPAN)  # sent when the session ended
    assert len(checks) == 2
    assert {c["resource"]["service.name"] for c in checks} == {"ragas-relevancy-pytest"}
    samples = received.named(SAMPLE_SPAN)
    assert {s["parent_id"] for s in samples} == {c["span_id"] for c in checks}
    assert len(received.named("chat ")) == 2


def test_a_relevancy_otel_that_is_not_a_url_stops_the_session(pytester):
    pytester.makepyfile(test_bot="def test_plain():\n    assert True\n")
    result = pytester.runpytest("--relevancy-otel", "collector:4318")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--relevancy-otel: the traces URL: give an http(s) URL*"])
