"""Options the commands share, declared once (a command asks for them with
:func:`with_settings`); nothing heavier than typer loads here, so ``--help`` stays instant."""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import fields, replace
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, TypeVar, cast

import typer

from ..scoring.languages import check_language
from ..scoring.otlp import OTEL_EXTRA, exporting, otlp_traces_url, sdk_installed
from ..scoring.probe_modes import MODES
from ..scoring.tracing import span
from ..scoring.usage import Prices
from .errors import UsageError
from .output import FORMATS
from .providers import EMBEDDINGS, JUDGES, choices
from .setup import Settings

__all__ = [
    "DO_NOT_TRACK",
    "ClusterOpt",
    "FileArg",
    "Interval",
    "IntervalOpt",
    "MapOpt",
    "PRICE_OPTIONS",
    "ProbePrompt",
    "SETTING_OPTIONS",
    "THREAD_VARIABLES",
    "TABLE_ROWS",
    "TableOpt",
    "model_threads_for_this_process",
    "option",
    "traced_command",
    "with_settings",
]

# "true" stops every RAGAS analytics request (read at its first event).
DO_NOT_TRACK = "RAGAS_DO_NOT_TRACK"
# Threads of one matrix operation, read by torch (and numpy's BLAS) when they load.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")

F = TypeVar("F", bound=Callable[..., Any])


def option(kind: Any, metavar: str | None, help: str, *names: str, **options: Any) -> Any:
    """``Annotated[kind, typer.Option(*names, metavar=..., help=...)]``."""
    return Annotated[kind, typer.Option(*names, metavar=metavar, help=help, **options)]


# How probe questions are asked for: one choice per registered probe mode.
ProbePrompt = Enum("ProbePrompt", {name: name for name in MODES}, type=str)  # type: ignore[misc]
ProbePrompt.__doc__ = "How probe questions are asked for."

FileArg = Annotated[
    Path,
    typer.Argument(metavar="FILE", help="JSONL, CSV or JSON rows with user_input and response."),
]
MapOpt = option(
    list[str] | None,
    "COLUMN=FIELD",
    "Read a column as user_input or response, e.g. --map question=user_input.",
    "--map",
    "-m",
)

# Runs of more rows print the summary, not the per-row table, unless --table asks for it.
TABLE_ROWS = 1000
TableOpt = option(
    bool | None,
    None,
    f"Print the per-row table (--no-table: the summary only). Default: score prints it up to "
    f"{TABLE_ROWS:,} rows, show always.",
    "--table/--no-table",
    show_default=False,
)


class Interval(str, Enum):
    """How the 95% interval of a run's mean is worked out (see ``error_bars``)."""

    clt = "clt"
    bootstrap = "bootstrap"


ClusterOpt = option(
    str | None,
    "COLUMN",
    "Rows sharing a value of this input column (e.g. a document id) count as one draw in the "
    "interval of the mean (clustered standard error).",
)
IntervalOpt = option(
    Interval,
    None,
    "Interval of the mean: clt (normal, default) or bootstrap (seeded; by cluster with --cluster).",
)


_RATE = (
    "{} per minute the run keeps to (the provider's limit; tokens estimated from each "
    "request's text). Not given: learned from the provider's x-ratelimit headers and 429s."
)

# One option per Settings field, in the order --help shows them.
SETTING_OPTIONS: dict[str, Any] = {
    "judge": option(str, "SPEC", f"{choices(JUDGES)} (keys from the environment)."),
    "base_url": option(
        str | None,
        "URL",
        "Judge server URL, for any OpenAI-compatible server (Groq, vLLM, Ollama).",
    ),
    "max_retries": option(
        int, "N", "Judge (and openai embeddings) client retries per call.", min=0
    ),
    "timeout": option(
        float | None,
        "SECONDS",
        "Give up on a judge or openai/gemini embeddings request after this long (then retry).",
        min=0.001,
    ),
    "embeddings": option(
        str,
        "SPEC",
        f"{choices(EMBEDDINGS)}. auto: local when the 'local' extra is installed, else hash. "
        "local runs on the cores less one (OMP_NUM_THREADS, when set, decides).",
    ),
    "embeddings_base_url": option(
        str | None, "URL", "Embeddings server URL (default: --base-url when the provider matches)."
    ),
    "one_text_per_call": option(
        bool,
        None,
        "Send one text per embeddings call (providers that merge a list).",
        "--one-text-per-call",
    ),
    "batch_embeddings": option(
        bool,
        None,
        "Send the texts of concurrent samples in shared embedding requests (up to 64 texts); "
        "off: two requests per sample. Never with --one-text-per-call.",
    ),
    "strictness": option(int, "N", "Probes per sample.", min=1),
    "probe_prompt": option(
        ProbePrompt,
        "MODE",
        "How probes are asked for: "
        + "; ".join(f"{mode.name}: {mode.help}" for mode in MODES.values())
        + ".",
    ),
    "concurrency": option(
        int,
        "N",
        "Judge and embedding calls in flight (the same default as the API's max_concurrency).",
        min=1,
    ),
    **{
        name: option(int | None, "N", _RATE.format(what), min=1)
        for name, what in (
            ("rpm", "Judge requests"),
            ("tpm", "Judge tokens"),
            ("embedding_rpm", "Embedding requests"),
            ("embedding_tpm", "Embedding tokens"),
        )
    },
    "patience": option(
        float,
        "SECONDS",
        "Ask a request answered 429 again (after the pause the provider asks for) until no "
        "request has succeeded for this long; then the run stops early (exit 4) and the same "
        "command resumes it.",
        min=0.001,
    ),
    "limits_file": option(
        Path | None,
        "FILE",
        "Keep the keys' rate limits in this SQLite file, shared by every process on this "
        "machine that names it, so two runs on one key keep to its limit together. Default: "
        "rate-limits.sqlite3 in --cache DIR.",
    ),
    "language": option(
        str,
        "auto|NAME",
        "Language of the probes. auto: diverse and sequential ask for the response's language "
        "(stock's prompt is sent as is); a name (japanese) translates the prompt's examples "
        "once with the judge, as RAGAS's adapt does.",
    ),
    "cache": option(Path | None, "DIR", "Keep judge replies in DIR; a re-run reuses them."),
    "analytics": option(
        bool,
        None,
        "Let RAGAS send its usage analytics (a request per judge call). Off by default: the "
        f"command sets {DO_NOT_TRACK}=true for itself; with --analytics the environment decides.",
        "--analytics",
    ),
    "otel": option(
        str | None,
        "URL",
        "Send traces (OpenTelemetry, OTLP over HTTP) to URL, e.g. http://localhost:4318 "
        "(/v1/traces is added): a span per sample, judge call and embeddings request (texts "
        "only with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true). Default: "
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT when set. Needs the "
        "[otel] extra.",
    ),
}

# What tokens cost, for a command that takes a ``prices`` parameter; no built-in price table.
PRICE_OPTIONS: dict[str, Any] = {
    name: option(float | None, "USD", f"{tokens}: USD per million, for the cost.", min=0.0)
    for name, tokens in (
        ("price_in", "Judge prompt tokens"),
        ("price_out", "Judge completion tokens"),
        ("price_embeddings", "Embedding tokens"),
    )
}
_DEFAULTS = {f.name: f.default for f in fields(Settings)}
_DEFAULTS["probe_prompt"] = ProbePrompt(_DEFAULTS["probe_prompt"])
assert set(SETTING_OPTIONS) == set(_DEFAULTS), "every Settings field has one option"


def with_settings(*, fixed: Mapping[str, Any] | None = None) -> Callable[[F], F]:
    """Give a command the settings options (less the ``fixed`` ones) in place of its ``settings``
    parameter, run under :func:`traced_command`; ``--NAME PATH`` per :data:`.output.FORMATS`
    entry in place of ``outputs`` (``{name: path}``) and :data:`PRICE_OPTIONS` for ``prices``."""
    fixed = dict(fixed or {})
    groups: dict[str, dict[str, tuple[Any, Any]]] = {
        "settings": {n: (a, _DEFAULTS[n]) for n, a in SETTING_OPTIONS.items() if n not in fixed},
        "outputs": {n: (option(Path | None, "PATH", fmt.help), None) for n, fmt in FORMATS.items()},
        "prices": {n: (a, None) for n, a in PRICE_OPTIONS.items()},
    }

    def decorate(command: F) -> F:
        signature = inspect.signature(command, eval_str=True)
        params: list[inspect.Parameter] = []
        for param in signature.parameters.values():
            if param.name not in groups:
                params.append(param)
                continue
            params.extend(
                inspect.Parameter(name, param.POSITIONAL_OR_KEYWORD, default=d, annotation=a)
                for name, (a, d) in groups[param.name].items()
            )

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            values = {name: kwargs.pop(name) for name in SETTING_OPTIONS if name in kwargs}
            if "outputs" in signature.parameters:
                given = {name: kwargs.pop(name) for name in FORMATS}
                kwargs["outputs"] = {name: path for name, path in given.items() if path}
            if "prices" in signature.parameters:  # in, out, embeddings: Prices' order
                kwargs["prices"] = Prices(*(kwargs.pop(name) for name in PRICE_OPTIONS))
            with traced_command(command.__name__, _settings({**values, **fixed})) as settings:
                return command(**kwargs, settings=settings)

        wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return cast(F, wrapper)

    return decorate


@contextlib.contextmanager
def traced_command(name: str, settings: Settings) -> Iterator[Settings]:
    """Run the command under one span, its traces sent to ``--otel`` (else the standard OTLP
    variables) and flushed at its end; yields the settings with the traces URL (Ray actors
    export there too). Without the [otel] extra only --otel is an error."""
    url = otlp_traces_url(settings.otel)
    if url is not None and settings.otel is None and not sdk_installed():
        print(
            "ragas-relevancy: note: OTEL_EXPORTER_OTLP_*ENDPOINT is set but the [otel] extra is "
            f"not installed, so no traces are sent ({OTEL_EXTRA})",
            file=sys.stderr,
        )
        url = None
    with exporting(url), span(f"ragas-relevancy {name}", {"ragas_relevancy.command": name}):
        yield replace(settings, otel=url)


def model_threads_for_this_process(environ: MutableMapping[str, str] | None = None) -> int | None:
    """Unless set already, :data:`THREAD_VARIABLES` = the cores less one (at least 1), so a
    local model leaves the event loop a core. Returns the count set, or None."""
    environ = os.environ if environ is None else environ
    if any(environ.get(name, "").strip() for name in THREAD_VARIABLES):
        return None
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    threads = max(1, cores - 1)
    environ.update(dict.fromkeys(THREAD_VARIABLES, str(threads)))
    return threads


def _settings(values: dict[str, Any]) -> Settings:
    if not values["analytics"]:  # RAGAS otherwise sends (and waits for) a request per judge call
        os.environ[DO_NOT_TRACK] = "true"
    model_threads_for_this_process()
    try:
        values["language"] = check_language(values["language"])
    except ValueError as exc:
        raise UsageError(f"--language: {exc}") from None
    values["probe_prompt"] = getattr(values["probe_prompt"], "value", values["probe_prompt"])
    return Settings(**values)
