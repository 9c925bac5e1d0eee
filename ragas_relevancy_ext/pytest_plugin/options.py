"""The plugin's options, each a flag, an ini key and an environment variable: the flag wins over
the environment, the environment over the ini file."""

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
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1 <= value <= 1:
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


def _choice(text: str) -> str:
    if text.strip().lower() not in ("warn", "refuse"):
        raise ValueError(f"must be one of warn, refuse, got {text!r}")
    return text.strip().lower()


_RATE = _number("must be a whole number of at least 1 per minute", lambda v: v >= 1, int)
_SECONDS = _number("timeout must be a number of seconds above 0", lambda v: v > 0)
_SCORE = _number("min_score must be a number from -1 to 1", lambda v: -1 <= v <= 1)
_DROP = _number("margin must be a number at or above 0", lambda v: v >= 0)
_LEARNED = "per minute (default: learned from the provider's headers and 429s)."

# name: (metavar, help, parser); the command line's ``Settings`` fields keep their names
OPTIONS: dict[str, tuple[str, str, Callable[[str], Any]]] = {
    "judge": ("SPEC", "Judge, e.g. openai:gpt-4o-mini or offline (none: not measured).", str),
    "embeddings": ("SPEC", "Embeddings, e.g. openai:text-embedding-3-small or hash.", str),
    "base_url": ("URL", "Server URL of an OpenAI-compatible judge.", str),
    "timeout": ("SECONDS", f"Seconds a whole check may take ({DEFAULT_TIMEOUT:g}).", _SECONDS),
    "rpm": ("N", f"Judge requests {_LEARNED}", _RATE),
    "tpm": ("N", f"Judge tokens {_LEARNED}", _RATE),
    "embedding_rpm": ("N", f"Embedding requests {_LEARNED}", _RATE),
    "embedding_tpm": ("N", f"Embedding tokens {_LEARNED}", _RATE),
    "cache": ("DIR", "Keep judge replies in DIR: an unchanged re-run makes no call.", Path),
    "min_score": ("SCORE", f"Threshold where a check sets none ({DEFAULT_MIN_SCORE}).", _SCORE),
    "baseline": ("REPORT", "Fail when the checks are significantly worse than REPORT.", Path),
    "margin": ("DROP", "The drop from the baseline's mean tolerated (0).", _DROP),
    "baseline_settings": ("WHAT", "warn or refuse a baseline of other settings (warn).", _choice),
    "report": ("PATH", "Write the scored checks to PATH as a JSONL report.", Path),
    "otel": ("URL", "Send the checks' traces over OTLP/HTTP to URL.", _otel),
}
# the options that are the command line's ``Settings`` fields of the same names
SETTINGS = "judge embeddings base_url cache rpm tpm embedding_rpm embedding_tpm".split()


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
    ini_folder = config.inipath.parent if config.inipath else config.rootpath
    for name, (_, _, parse) in OPTIONS.items():
        flag, ini, env = names(name)
        found = [
            (config.getoption(ini), flag, config.invocation_params.dir),
            (os.environ.get(env), env, config.invocation_params.dir),
            (config.getini(ini), f"ini {ini}", ini_folder),
        ]
        for text, source, base in found:
            if text is not None and str(text).strip():
                try:
                    value = parse(str(text).strip())
                except ValueError as exc:
                    raise pytest.UsageError(f"{source}: {exc}") from None
                given[name] = base / value.expanduser() if isinstance(value, Path) else value
                sources[name] = source
                break
    return given, sources
