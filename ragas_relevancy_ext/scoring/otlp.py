"""Sending spans over OTLP/HTTP (the ``[otel]`` extra) for the command line, the pytest plugin and
Ray actors, from an SDK tracer provider of the package's own (the global one is the user's)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import SplitResult, urlsplit

from ..errors import UsageError
from .redaction import redact
from .tracing import _State, attached_context, tracer, use_provider

__all__ = [
    "OTEL_EXTRA",
    "TRACES_PATH",
    "attached",
    "carrier",
    "export_to",
    "exporting",
    "flush",
    "otlp_traces_url",
]

OTEL_EXTRA = "pip install 'ragas-relevancy-ext[otel]'"
TRACES_PATH = "/v1/traces"
SERVICE = "ragas-relevancy"


def otlp_traces_url(
    given: str | None, environ: Mapping[str, str] | None = None, source: str = "--otel"
) -> str | None:
    """Where spans go: ``given`` (a base URL, ``/v1/traces`` added), else the standard
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (as is) or ``OTEL_EXPORTER_OTLP_ENDPOINT`` (a base);
    UsageError naming ``source`` (or the variable) for a URL that is not http(s)."""
    environ = os.environ if environ is None else environ
    if given is None:
        if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            return None
        for source in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
            given = environ.get(source, "").strip() or None
            if given is not None:
                break
        else:
            return None
        if source.endswith("TRACES_ENDPOINT"):
            _check_url(given, source)
            return given
    parts = _check_url(given.strip(), source)
    path = parts.path.rstrip("/")
    return parts._replace(path=path if path.endswith(TRACES_PATH) else path + TRACES_PATH).geturl()


def _check_url(url: str, source: str) -> SplitResult:
    parts = urlsplit(url)
    try:
        usable = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port out of range or not a number
        usable = False
    if not usable:
        raise UsageError(
            f"{source}: give an http(s) URL such as http://localhost:4318, got {redact(url)!r}"
        )
    return parts


def sdk_installed() -> bool:
    """Whether the OpenTelemetry SDK and OTLP/HTTP exporter (the ``[otel]`` extra) import."""
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return False
    return True


@contextlib.contextmanager
def exporting(url: str | None, service: str = SERVICE) -> Iterator[bool]:
    """Inside the block, spans go over OTLP/HTTP to ``url`` (a traces URL), then are flushed;
    yields whether anything is exported. UsageError when the ``[otel]`` extra is missing."""
    if url is None:
        yield False
        return
    previous = use_provider(None)
    provider = export_to(url, service)
    try:
        yield True
    finally:
        use_provider(previous)
        provider.shutdown()  # sends what is left


def export_to(url: str, service: str = SERVICE) -> Any:
    """Send this process's spans to ``url`` from now on (a Ray actor: for its lifetime), from a
    tracer provider of the package's own; the exporter and batch processor read their other
    settings (headers, timeout, compression, batch sizes) from ``OTEL_*`` themselves."""
    if not sdk_installed():
        raise UsageError(f"sending traces needs the [otel] extra: {OTEL_EXTRA}")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are read by Resource.create; given
    # attributes win over them, so the default name is given only when the variable is unset
    named = {} if os.environ.get("OTEL_SERVICE_NAME", "").strip() else {"service.name": service}
    provider = TracerProvider(resource=Resource.create(named))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
    use_provider(provider)
    return provider


def flush() -> None:
    """Send the spans waiting in the exporter :func:`export_to` set up (a Ray batch's)."""
    if _State.own is not None:
        _State.own.force_flush()


def carrier() -> dict[str, str]:
    """The current span as W3C ``traceparent`` headers, for work done in another process."""
    if tracer() is None:
        return {}
    from opentelemetry.propagate import inject

    headers: dict[str, str] = {}
    inject(headers)
    return headers


def attached(headers: Mapping[str, str] | None) -> contextlib.AbstractContextManager[Any]:
    """Work under the span that :func:`carrier` gave in another process."""
    if not headers:
        return contextlib.nullcontext()
    from opentelemetry.propagate import extract

    return attached_context(extract(dict(headers)))
