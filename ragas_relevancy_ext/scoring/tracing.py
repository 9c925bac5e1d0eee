"""OpenTelemetry spans (the ``[otel]`` extra): a span per scored sample with one event per probe,
and a child span per judge call and embeddings request, named and attributed as the GenAI
semantic conventions say. Texts (questions, responses, probes, prompts, replies) are recorded
only when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``; keys never.

OpenTelemetry is never imported here: :func:`tracer` is None unless the API is loaded and a
tracer provider is set (the user's own, or one :func:`exporting` set up for the command line,
the pytest plugin or a Ray actor through :mod:`.otlp`), and callers then skip every span.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

from ..errors import cause_of
from .redaction import redact
from .usage import UsageMeter, current_meter, metering

__all__ = [
    "CAPTURE_CONTENT",
    "PROBE_EVENT",
    "SAMPLE_SPAN",
    "attached_context",
    "end_span",
    "gen_ai_span",
    "note_reply",
    "note_report",
    "note_vectors",
    "row",
    "row_parents",
    "sample_span",
    "shared_request",
    "span",
    "span_context",
    "start_span",
    "tracer",
    "use_provider",
]

CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
SAMPLE_SPAN = "ragas_relevancy.sample"
PROBE_EVENT = "ragas_relevancy.probe"
SCOPE = "ragas_relevancy_ext"
_PROVIDERS = {"openai": "openai", "google": "gcp.gemini", "gemini": "gcp.gemini"}
_PROVIDERS.update({"anthropic": "anthropic", "groq": "groq", "mistral": "mistral_ai"})


class _State:
    own: Any = None  # a provider of the package's own (see .otlp), used instead of the global one
    seen: Any = None  # the provider last asked, and its tracer
    seen_tracer: Any = None


def use_provider(provider: Any) -> Any:
    """Trace to ``provider`` (None: the global one) instead; returns the one used before."""
    previous, _State.own = _State.own, provider
    return previous


def tracer() -> Any:
    """The package's tracer, or None when no tracer provider is configured (nothing traced)."""
    provider = _State.own
    if provider is None:
        api = sys.modules.get("opentelemetry.trace")
        if api is None:  # never imported: no provider can have been set
            return None
        # what set_tracer_provider set, read without get_tracer_provider's look-up of its
        # variable in os.environ (microseconds per call, as much as the rest of this together)
        provider = getattr(api, "_TRACER_PROVIDER", _ASK)
        if provider is None and not _provider_variable():
            return None
        if provider is None or provider is _ASK:
            provider = api.get_tracer_provider()
        if isinstance(provider, (api.ProxyTracerProvider, api.NoOpTracerProvider)):
            return None
    if provider is not _State.seen:
        _State.seen, _State.seen_tracer = provider, provider.get_tracer(SCOPE, _version())
    return _State.seen_tracer


_ASK = object()  # an API that keeps its provider elsewhere: ask get_tracer_provider


@functools.cache
def _provider_variable() -> bool:
    """Whether OTEL_PYTHON_TRACER_PROVIDER names a provider for the API to load when asked."""
    return bool(os.environ.get("OTEL_PYTHON_TRACER_PROVIDER"))


@functools.cache
def _version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ragas-relevancy-ext")
    except PackageNotFoundError:
        return None


def capture_content() -> bool:
    """Whether texts may be recorded (the conventions' opt-in variable is ``true``)."""
    return os.environ.get(CAPTURE_CONTENT, "").strip().lower() == "true"


@contextlib.contextmanager
def span(
    name: str, attributes: Mapping[str, Any] | None = None, parent: Any = None
) -> Iterator[Any]:
    """A span named ``name`` made current (under ``parent``, a context, when given), an error
    recorded with its cause; yields None when nothing is traced."""
    found = tracer()
    if found is None:
        yield None
        return
    options = dict(attributes=dict(attributes or {}), context=parent)
    with found.start_as_current_span(
        name, **options, record_exception=False, set_status_on_exception=False
    ) as current:
        try:
            yield current
        except BaseException as exc:
            _failed(current, exc, cause=True)
            raise


def start_span(name: str, attributes: Mapping[str, Any], parent: Any = None) -> Any:
    """``(span, its context)`` of a span started (not made current) under ``parent`` (a
    context), for work that goes on elsewhere; None when nothing is traced."""
    found = tracer()
    if found is None:
        return None
    from opentelemetry import trace

    started = found.start_span(name, context=parent, attributes=dict(attributes))
    return started, trace.set_span_in_context(started, parent)


def end_span(current: Any, attributes: Mapping[str, Any], error: str | None = None) -> None:
    """End a span of :func:`start_span` with ``attributes`` (an error status for ``error``)."""
    current.set_attributes(dict(attributes))
    if error is not None:
        _error_status(current, error, error)
    current.end()


def sample_span(
    strictness: int, mode: str, prompt: str, user_input: Any, response: Any
) -> contextlib.AbstractContextManager[Any]:
    """The span of one sample (see :func:`note_report` for what it gets at the end)."""
    attributes: dict[str, Any] = {
        "ragas_relevancy.strictness": strictness,
        "ragas_relevancy.probe_mode": mode,
        "ragas_relevancy.probe_prompt": prompt,
    }
    if capture_content():
        texts = {"user_input": user_input, "response": response}
        attributes.update(
            {f"ragas_relevancy.{k}": v for k, v in texts.items() if isinstance(v, str)}
        )
    return span(SAMPLE_SPAN, attributes)


def note_report(current: Any, report: Any) -> None:
    """Score (or the cause of a NaN), probe similarity, calls and usage; an event per probe."""
    if not current.is_recording():
        return
    attributes: dict[str, Any] = {
        "ragas_relevancy.probes": len(report.probes),
        "ragas_relevancy.judge_calls": report.judge_calls,
        "ragas_relevancy.duplicates_dropped": report.duplicates_dropped,
        "ragas_relevancy.all_noncommittal": report.all_noncommittal,
    }
    if math.isfinite(report.score):
        attributes["ragas_relevancy.score"] = report.score
    if report.probe_similarity is not None and math.isfinite(report.probe_similarity):
        attributes["ragas_relevancy.probe_similarity"] = report.probe_similarity
    usage = report.usage
    if usage is not None:
        for name, value in usage.to_dict().items():
            if value is not None:
                attributes[f"ragas_relevancy.usage.{name}"] = value
    current.set_attributes(attributes)
    texts = capture_content()
    for index, probe in enumerate(report.probes):
        event: dict[str, Any] = {
            "ragas_relevancy.probe.index": index,
            "ragas_relevancy.probe.noncommittal": bool(probe.noncommittal),
        }
        if math.isfinite(probe.cosine):
            event["ragas_relevancy.probe.cosine"] = probe.cosine
        if texts:
            event["ragas_relevancy.probe.question"] = probe.question
        current.add_event(PROBE_EVENT, event)
    if report.cause is not None:  # NaN with no exception: no usable probe
        _error_status(current, str(report.cause), f"Not scored ({report.cause})")
        current.set_attribute("ragas_relevancy.cause", str(report.cause))


@contextlib.contextmanager
def gen_ai_span(
    found: Any, operation: str, client: Any, prompt: str | None = None
) -> Iterator[Any]:
    """A GenAI client span (``chat MODEL``, ``embeddings MODEL``) under the current span, with
    the request's token usage as the provider reported it (read from a meter of its own, whose
    usage then goes on to the caller's)."""
    from opentelemetry.trace import Link, SpanKind

    provider, model, server = _describe(client)
    attributes: dict[str, Any] = {"gen_ai.operation.name": operation, "gen_ai.request.model": model}
    if provider:
        attributes["gen_ai.provider.name"] = attributes["gen_ai.system"] = provider
    if server is not None:
        attributes["server.address"], port = server
        if port is not None:
            attributes["server.port"] = port
    if operation == "chat":
        attributes["gen_ai.output.type"] = "json"
        if prompt is not None and capture_content():
            parts = [{"type": "text", "content": prompt}]
            attributes["gen_ai.input.messages"] = json.dumps([{"role": "user", "parts": parts}])
    links = [Link(c) for c in _LINKS.get() or () if c.is_valid]
    if links:
        attributes["ragas_relevancy.samples"] = len(links) + 1
    outer, own = current_meter(), UsageMeter()
    with found.start_as_current_span(
        f"{operation} {model}",
        kind=SpanKind.CLIENT,
        attributes=attributes,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            with metering(own):
                yield current
        except BaseException as exc:
            _failed(current, exc)
            raise
        finally:
            if outer is not None:
                outer.add(own.usage)
            _note_usage(current, own.usage, operation)


def _note_usage(current: Any, usage: Any, operation: str) -> None:
    if operation == "chat":
        pairs = [("input", usage.judge_prompt_tokens), ("output", usage.judge_completion_tokens)]
        current.set_attribute("ragas_relevancy.requests", usage.judge_requests)
    else:
        pairs = [("input", usage.embedding_tokens)]
        current.set_attribute("ragas_relevancy.requests", usage.embedding_requests)
    for name, tokens in pairs:
        if tokens is not None:
            current.set_attribute(f"gen_ai.usage.{name}_tokens", tokens)


def note_reply(current: Any, reply: Any) -> None:
    """The judge's reply: response model and id (instructor keeps the completion), and the
    reply itself when texts are recorded."""
    raw = getattr(reply, "_raw_response", None)
    for key, name in (("gen_ai.response.model", "model"), ("gen_ai.response.id", "id")):
        value = getattr(raw, name, None)
        if isinstance(value, str):
            current.set_attribute(key, value)
    if capture_content() and hasattr(reply, "model_dump_json"):
        parts = [{"type": "text", "content": reply.model_dump_json()}]
        message = {"role": "assistant", "parts": parts, "finish_reason": "stop"}
        current.set_attribute("gen_ai.output.messages", json.dumps([message]))


def note_vectors(current: Any, vectors: Any) -> None:
    """How many vectors came back, and their width."""
    try:
        current.set_attribute("ragas_relevancy.vectors", len(vectors))
        if len(vectors):
            current.set_attribute("gen_ai.embeddings.dimension.count", len(vectors[0]))
    except TypeError:  # not a list of lists: the vector checks will say so
        pass


def _describe(client: Any) -> tuple[str | None, str, tuple[str, int | None] | None]:
    """(provider, model, (host, port)) of a judge or embeddings object, as far as it tells."""
    inner = getattr(client, "langchain_llm", None) or getattr(client, "embeddings", None)
    target = client if inner is None or isinstance(inner, (str, bool)) else inner
    names = (getattr(target, n, None) for n in ("model", "model_name"))
    model = next((v for v in names if isinstance(v, str)), type(target).__name__)
    provider = getattr(target, "provider", None) or getattr(target, "_llm_type", None)
    if isinstance(provider, str):  # LangChain's kind: "openai-chat"
        provider = provider.lower().partition("-")[0]
        provider = _PROVIDERS.get(provider, provider)
    sdk = getattr(target, "client", None)  # instructor's client, or the OpenAI SDK's
    url = getattr(sdk, "base_url", None) or getattr(getattr(sdk, "client", None), "base_url", None)
    host = urlsplit(str(url or getattr(target, "openai_api_base", None) or ""))
    server = (host.hostname, host.port) if host.hostname else None
    return provider if isinstance(provider, str) else None, model, server


def _failed(current: Any, exc: BaseException, cause: bool = False) -> None:
    """``error.type``, an error status and an exception event, the message's keys masked."""
    name = type(exc)
    message = redact(str(exc))[:1000]
    _error_status(current, f"{name.__module__}.{name.__qualname__}", message)
    current.add_event(
        "exception", {"exception.type": name.__qualname__, "exception.message": message}
    )
    if cause:
        current.set_attribute("ragas_relevancy.cause", str(cause_of(exc)))


def _error_status(current: Any, error_type: str, description: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    current.set_attribute("error.type", error_type)
    current.set_status(Status(StatusCode.ERROR, description))


# -- contexts: requests shared by samples, rows of a batch ------------------------------------

_LINKS: ContextVar[Sequence[Any] | None] = ContextVar("ragas_relevancy_links", default=None)
_ROW_PARENTS: ContextVar[Sequence[Any] | None] = ContextVar("ragas_relevancy_rows", default=None)
_NOTHING = contextlib.nullcontext()


def span_context() -> Any:
    """The current context when something is traced (to make a later span its child), else None."""
    if tracer() is None:
        return None
    from opentelemetry import context

    return context.get_current()


@contextlib.contextmanager
def shared_request(contexts: Sequence[Any]) -> Iterator[None]:
    """A request carrying several samples' texts: under the first sample's span, linked to the
    others' (``contexts`` from :func:`span_context`)."""
    known = [c for c in contexts if c is not None]
    if not known:
        yield
        return
    from opentelemetry import trace

    token = _LINKS.set([trace.get_current_span(c).get_span_context() for c in known[1:]])
    try:
        with attached_context(known[0]):
            yield
    finally:
        _LINKS.reset(token)


@contextlib.contextmanager
def attached_context(parent: Any) -> Iterator[None]:
    """Make ``parent`` (a context) current inside the block."""
    from opentelemetry import context

    token = context.attach(parent)
    try:
        yield
    finally:
        context.detach(token)


@contextlib.contextmanager
def row_parents(contexts: Sequence[Any]) -> Iterator[None]:
    """Inside the block, row ``i`` of a batch (see :func:`row`) is traced under ``contexts[i]``."""
    token = _ROW_PARENTS.set(contexts)
    try:
        yield
    finally:
        _ROW_PARENTS.reset(token)


def row(index: int) -> contextlib.AbstractContextManager[Any]:
    """Row ``index`` of a batch under the context given for it by :func:`row_parents`."""
    parents = _ROW_PARENTS.get()
    if parents is None or index >= len(parents) or parents[index] is None:
        return _NOTHING
    return attached_context(parents[index])
