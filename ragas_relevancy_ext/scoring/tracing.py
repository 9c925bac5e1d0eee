"""OpenTelemetry spans: one per scored sample with an event per probe, and a child per judge call
and embeddings request as the official GenAI instrumentation names them (none for a call another
instrumentation traces). Texts are recorded as its switches say (:func:`capture_content`), keys
never. :func:`tracer` is None, and callers skip every span, unless a tracer provider is set.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

from ..errors import cause_of, deciding_error
from .redaction import redact
from .usage import (
    UsageMeter,
    Watch,
    context_value,
    current_meter,
    hook_clients,
    metering,
    openai_clients,
    watching,
)

__all__ = [
    "CAPTURE_CONTENT",
    "PROBE_EVENT",
    "SAMPLE_SPAN",
    "TEXTS_EVENT",
    "OPT_IN",
    "attached_context",
    "capture_content",
    "client_call",
    "end_span",
    "note_report",
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
OPT_IN = "OTEL_SEMCONV_STABILITY_OPT_IN"  # gen_ai_latest_experimental: the newer capture modes
SAMPLE_SPAN = "ragas_relevancy.sample"
PROBE_EVENT = "ragas_relevancy.probe"
TEXTS_EVENT = "ragas_relevancy.texts"  # the question and response, when texts go in events
SCOPE = "ragas_relevancy_ext"
_PROVIDERS = {"openai": "openai", "google": "gcp.gemini", "gemini": "gcp.gemini"}
_PROVIDERS.update({"anthropic": "anthropic", "groq": "groq", "mistral": "mistral_ai"})


class _State:
    own: Any = None  # a provider of the package's own (see .otlp), used instead of the global one


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
        provider = api.get_tracer_provider()
        if isinstance(provider, (api.ProxyTracerProvider, api.NoOpTracerProvider)):
            return None
    return _tracer_of(provider)


@functools.lru_cache(maxsize=4)
def _tracer_of(provider: Any) -> Any:
    from importlib.metadata import PackageNotFoundError, version

    try:
        release: str | None = version("ragas-relevancy-ext")
    except PackageNotFoundError:
        release = None
    return provider.get_tracer(SCOPE, release)


def capture_content() -> tuple[bool, bool]:
    """Where texts go, (on span attributes, in span events), as the official GenAI
    instrumentation reads its switches (``SPAN_ONLY``, ``EVENT_ONLY``, ``SPAN_AND_EVENT`` when
    opted in to the latest conventions; else ``true``: both)."""
    value = os.environ.get(CAPTURE_CONTENT, "").strip()
    opted = os.environ.get(OPT_IN, "").split(",")
    if "gen_ai_latest_experimental" in (o.strip() for o in opted):
        mode = value.upper()
        return mode in ("SPAN_ONLY", "SPAN_AND_EVENT"), mode in ("EVENT_ONLY", "SPAN_AND_EVENT")
    return (True, True) if value.lower() == "true" else (False, False)


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
    if capture_content()[0]:
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
    texts = capture_content()[1]
    if texts:  # in an event, as sample_span's attributes hold them for the span modes
        asked = {"user_input": report.user_input, "response": report.response}
        current.add_event(TEXTS_EVENT, {f"ragas_relevancy.{k}": v for k, v in asked.items() if v})
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
def client_call(operation: str, client: Any, prompt: str | None = None) -> Iterator[Watch]:
    """Watch one judge call (``chat``) or embeddings request of ``client`` (its OpenAI SDK
    answers noted in the yielded :class:`.usage.Watch`; set ``watch.result``). With a tracer,
    the call becomes a span when it ends (``chat MODEL``), unless another instrumentation's
    span was current around its requests."""
    if operation == "chat":
        hook_clients(client)  # rate-limit headers, and bodies for spans; embeddings hook their own
    found = tracer()
    if found is None:
        with watching(Watch()) as watch:
            yield watch
        return
    from opentelemetry import context, trace

    parent = context.get_current()
    mine = trace.get_current_span(parent)

    def elsewhere() -> bool:
        current = trace.get_current_span()
        return current is not mine and current.is_recording()

    watch, outer, own = Watch(bodies=True, elsewhere=elsewhere), current_meter(), UsageMeter()
    start, error = time.time_ns(), None
    try:
        with watching(watch), metering(own):
            yield watch
    except BaseException as exc:
        error = exc
        raise
    finally:
        if outer is not None:
            outer.add(own.usage)
        if not watch.traced_elsewhere:
            call = found.start_span(
                **_client_span(operation, client, watch, own.usage),
                context=parent,
                start_time=start,
            )
            on_span, in_event = capture_content()
            if operation == "chat" and (on_span or in_event):
                texts = _messages(watch, prompt)
                if on_span:
                    call.set_attributes(texts)
                if in_event:
                    call.add_event("gen_ai.client.inference.operation.details", texts)
            if error is not None:
                _failed(call, error)
            call.end()


# the request's parameters the official instrumentation records, by their name in the body
_REQUEST = ("temperature", "top_p", "max_tokens", "presence_penalty", "frequency_penalty", "seed")


def _client_span(operation: str, client: Any, watch: Watch, usage: Any) -> dict[str, Any]:
    """The name, kind, attributes and links of a call's span, from its last request and answer."""
    from opentelemetry.trace import Link, SpanKind

    provider, model, server = _describe(client)
    attributes: dict[str, Any] = {"gen_ai.operation.name": operation, "gen_ai.request.model": model}
    if provider:
        attributes["gen_ai.provider.name"] = provider
    if server is not None:
        attributes["server.address"], port = server
        if port is not None:
            attributes["server.port"] = port
    sent, answer = _last(watch, "sent"), _last(watch, "answer")
    for key, name in (("gen_ai.response.model", "model"), ("gen_ai.response.id", "id")):
        if isinstance(answer.get(name), str):
            attributes[key] = answer[name]
    choices = [c for c in answer.get("choices") or () if isinstance(c, dict)]
    if operation == "chat":
        kind = sent.get("response_format")
        kind = kind.get("type") if isinstance(kind, dict) else kind
        if isinstance(kind, str):  # as the official instrumentation names it
            attributes["gen_ai.output.type"] = "json" if kind.startswith("json_") else kind
        for name in _REQUEST:
            if isinstance(sent.get(name), (int, float)):
                attributes[f"gen_ai.request.{name}"] = sent[name]
        if choices:
            reasons = [c.get("finish_reason") or "error" for c in choices]
            attributes["gen_ai.response.finish_reasons"] = reasons
        tokens = [("input", usage.judge_prompt_tokens), ("output", usage.judge_completion_tokens)]
        attributes["ragas_relevancy.requests"] = usage.judge_requests
    else:
        tokens = [("input", usage.embedding_tokens)]
        attributes["ragas_relevancy.requests"] = usage.embedding_requests
        vectors = watch.result
        if isinstance(vectors, Sequence) or hasattr(vectors, "shape"):
            attributes["ragas_relevancy.vectors"] = len(vectors)
            if len(vectors) and hasattr(vectors[0], "__len__"):
                attributes["gen_ai.embeddings.dimension.count"] = len(vectors[0])
    for name, count in tokens:
        if count is not None:
            attributes[f"gen_ai.usage.{name}_tokens"] = count
    links = [Link(c) for c in _LINKS.get() or () if c.is_valid]
    if links:
        attributes["ragas_relevancy.samples"] = len(links) + 1
    name = f"{operation} {model}"
    return dict(name=name, kind=SpanKind.CLIENT, attributes=attributes, links=links)


def _last(watch: Watch, part: str) -> dict[str, Any]:
    """The last request body (``sent``) or answer (``answer``) of the call read as JSON."""
    bodies = (getattr(e, part) for e in reversed(watch.exchanges))
    return next((body for body in bodies if isinstance(body, dict)), {})


def _messages(watch: Watch, prompt: Any) -> dict[str, str]:
    """The messages sent and answered, in the GenAI conventions' JSON."""
    asked = _last(watch, "sent").get("messages") or [{"role": "user", "content": prompt}]
    choices = [c for c in _last(watch, "answer").get("choices") or () if isinstance(c, dict)]
    answered = [c.get("message") or {} for c in choices]
    if not choices and hasattr(watch.result, "model_dump_json"):
        answered = [{"role": "assistant", "content": watch.result.model_dump_json()}]
    reasons = [c.get("finish_reason") or "error" for c in choices] or ["stop"] * len(answered)
    outputs = [
        {**_message(m, "assistant"), "finish_reason": r}
        for m, r in zip(answered, reasons, strict=True)
    ]
    return {
        "gen_ai.input.messages": json.dumps([_message(m, "user") for m in asked]),
        "gen_ai.output.messages": json.dumps(outputs),
    }


def _message(message: Any, role: str) -> dict[str, Any]:
    """One chat message (an OpenAI body's) as the conventions' role and parts."""
    message = message if isinstance(message, dict) else {}
    content = message.get("content")
    items = [content] if isinstance(content, str) else content or []
    texts = [
        i if isinstance(i, str) else i.get("text") for i in items if isinstance(i, (str, dict))
    ]
    parts: list[dict[str, Any]] = [{"type": "text", "content": t} for t in texts if t is not None]
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        name, arguments = function.get("name"), function.get("arguments")
        parts.append(
            {"type": "tool_call", "id": call.get("id"), "name": name, "arguments": arguments}
        )
    return {"role": message.get("role") or role, "parts": parts}


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
    sdks = openai_clients(target)  # the OpenAI SDK clients it sends through
    url = sdks[0].base_url if sdks else getattr(target, "openai_api_base", None)
    host = urlsplit(str(url or ""))
    server = (host.hostname, host.port) if host.hostname else None
    if not isinstance(provider, str):
        provider = "openai" if sdks else None
    return provider, model, server


def _failed(current: Any, exc: BaseException, cause: bool = False) -> None:
    """``error.type`` of the provider's error, an error status and an exception event."""
    error = deciding_error(exc)
    name, message = type(error), redact(str(error))[:1000]
    kind = name.__qualname__
    kind = kind if name.__module__ == "builtins" else f"{name.__module__}.{kind}"
    _error_status(current, kind, message)
    current.add_event("exception", {"exception.type": kind, "exception.message": message})
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

    links = [trace.get_current_span(c).get_span_context() for c in known[1:]]
    with context_value(_LINKS, links), attached_context(known[0]):
        yield


@contextlib.contextmanager
def attached_context(parent: Any) -> Iterator[None]:
    """Make ``parent`` (a context) current inside the block."""
    from opentelemetry import context

    token = context.attach(parent)
    try:
        yield
    finally:
        context.detach(token)


def row_parents(contexts: Sequence[Any]) -> contextlib.AbstractContextManager[Any]:
    """Inside the block, row ``i`` of a batch (see :func:`row`) is traced under ``contexts[i]``."""
    return context_value(_ROW_PARENTS, contexts)


def row(index: int) -> contextlib.AbstractContextManager[Any]:
    """Row ``index`` of a batch under the context given for it by :func:`row_parents`."""
    parents = _ROW_PARENTS.get()
    if parents is None or index >= len(parents) or parents[index] is None:
        return _NOTHING
    return attached_context(parents[index])
