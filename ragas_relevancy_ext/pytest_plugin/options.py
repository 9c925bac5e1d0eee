"""The plugin's options, each a flag (``addoption``), an ini key (``addini``) and an environment
variable: the command line wins over the environment, the environment over the ini file."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

DEFAULT_MIN_SCORE = 0.7
DEFAULT_TIMEOUT = 60.0  # seconds a whole check may take, retries included


def check_min_score(value: Any) -> float:
    """A threshold is a number from -1 to 1 (cosines are raw, so a score can be negative)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or not -1.0 <= value <= 1.0:
        raise ValueError(f"min_score must be a number from -1 to 1, got {value!r}")
    return float(value)


def _number(rule: str, ok: Callable[[float], bool], kind: type = float) -> Callable[[str], Any]:
    """A parser of a finite ``kind`` for which ``ok`` holds; anything else is ``rule``'s error."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or not ok(value):
            raise ValueError(f"{rule}, got {text!r}")
        return value

    return parse


def _otel(text: str) -> str:
    """An OTLP/HTTP base URL, as the traces URL spans are sent to."""
    from ..scoring.otlp import otlp_traces_url

    return otlp_traces_url(text.strip(), source="the traces URL") or text


def _min_score(text: str) -> float:
    try:
        return check_min_score(float(text))
    except ValueError:
        raise ValueError(f"min_score must be a number from -1 to 1, got {text!r}") from None


def _one_of(*choices: str) -> Callable[[str], str]:
    """A parser of one of ``choices`` (any case)."""

    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}, got {text!r}")
        return value

    return parse


def _path(text: str) -> Path:
    return Path(os.path.expanduser(text))


_PER_MINUTE = (
    "per minute the checks keep to (the provider's limit); not set: learned from the provider's "
    "x-ratelimit headers and 429s."
)
_RATE = _number("must be a whole number of at least 1 per minute", lambda v: v >= 1, int)

# name: (metavar, help, parser); the ``Settings`` fields of the command line keep their names
OPTIONS: dict[str, tuple[str, str, Callable[[str], Any]]] = {
    "judge": (
        "SPEC",
        "Judge, as 'ragas-relevancy score --judge' takes it, e.g. openai:gpt-4o-mini (keys from "
        "the environment); 'offline' scores with the offline stand-in. None set: every check "
        "fails as not measured.",
        str,
    ),
    "embeddings": (
        "SPEC",
        "Embeddings, as 'ragas-relevancy score --embeddings' takes them (default: local when the "
        "'local' extra is installed; without it, checks fail as not measured unless this is set, "
        "'hash' included).",
        str,
    ),
    "base_url": (
        "URL",
        "Judge server URL, for any OpenAI-compatible server (and for embeddings of the same "
        "provider).",
        str,
    ),
    "timeout": (
        "SECONDS",
        f"A check not scored within SECONDS, retries included, fails as not measured (default: "
        f"{DEFAULT_TIMEOUT:g}).",
        _number("timeout must be a number of seconds above 0", lambda v: v > 0),
    ),
    "rpm": ("N", f"Judge requests {_PER_MINUTE}", _RATE),
    "tpm": ("N", f"Judge tokens {_PER_MINUTE}", _RATE),
    "embedding_rpm": ("N", f"Embedding requests {_PER_MINUTE}", _RATE),
    "embedding_tpm": ("N", f"Embedding tokens {_PER_MINUTE}", _RATE),
    "cache": (
        "DIR",
        "Keep judge replies in DIR (shared by pytest-xdist workers); a re-run of unchanged "
        "checks makes no judge call.",
        _path,
    ),
    "min_score": (
        "SCORE",
        f"Threshold for checks that set none (default: {DEFAULT_MIN_SCORE}).",
        _min_score,
    ),
    "baseline": (
        "REPORT",
        "A JSONL report of an earlier run (score --out, or --relevancy-report): the session fails "
        "when its checks are significantly worse than it (paired by question) by more than the "
        "margin.",
        _path,
    ),
    "margin": (
        "DROP",
        "The drop in mean score from the baseline the session tolerates (default: 0).",
        _number("margin must be a number at or above 0", lambda v: v >= 0),
    ),
    "baseline_settings": (
        "WHAT",
        "warn (default) or refuse: what the gate does with a baseline scored with other "
        "settings (judge, embeddings, strictness, probe prompt, language); refuse stops the "
        "session before its first test.",
        _one_of("warn", "refuse"),
    ),
    "report": (
        "PATH",
        "Write the session's scored checks to PATH as a JSONL report (a baseline for a later "
        "session).",
        _path,
    ),
    "otel": (
        "URL",
        "Send traces (OpenTelemetry, OTLP over HTTP; the [otel] extra) to URL, e.g. "
        "http://localhost:4318: a span per check, under the test's span when one is current, "
        "with its sample's judge and embeddings spans inside. Without it, checks are traced "
        "only to a tracer provider the session set up itself.",
        _otel,
    ),
}
# the options that are the command line's ``Settings`` fields of the same names
SETTINGS = (
    "judge",
    "embeddings",
    "base_url",
    "rpm",
    "tpm",
    "embedding_rpm",
    "embedding_tpm",
    "cache",
)


def names(name: str) -> tuple[str, str, str]:
    """The flag, ini key and environment variable of option ``name``."""
    flag = "--relevancy-" + name.replace("_", "-")
    return flag, "relevancy_" + name, f"RAGAS_RELEVANCY_{name.upper()}"


def add_options(parser: pytest.Parser) -> None:
    """Declare every option as a flag and an ini key."""
    group = parser.getgroup("relevancy", "answer relevancy checks (ragas-relevancy-ext)")
    for name, (metavar, text, _) in OPTIONS.items():
        flag, ini, env = names(name)
        group.addoption(flag, dest=ini, metavar=metavar, help=f"{text} ini: {ini}; env: {env}.")
        parser.addini(ini, f"{text} (also {flag}, {env})")


def read_options(config: pytest.Config) -> tuple[dict[str, Any], dict[str, str]]:
    """The options given and where each came from; a bad value is a ``pytest.UsageError``.
    A relative path is read from where pytest started, or the ini file's folder."""
    if os.environ.get("RAGAS_RELEVANCY_BATCH"):  # an option of earlier versions: never ignored
        raise pytest.UsageError(
            "RAGAS_RELEVANCY_BATCH: checks are scored where they are made; run tests at once "
            "with pytest-xdist (-n)"
        )
    given: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, (_, _, parse) in OPTIONS.items():
        flag, ini, env = names(name)
        base = config.invocation_params.dir
        text, source = config.getoption(ini), flag
        if text is None:
            text, source = os.environ.get(env, "").strip() or None, env
        if text is None:
            text, source = str(config.getini(ini)).strip() or None, f"ini {ini}"
            base = config.inipath.parent if config.inipath else config.rootpath
        if text is None:
            continue
        try:
            value = parse(text)
        except ValueError as exc:
            raise pytest.UsageError(f"{source}: {exc}") from None
        given[name] = base / value if isinstance(value, Path) else value
        sources[name] = source
    return given, sources
