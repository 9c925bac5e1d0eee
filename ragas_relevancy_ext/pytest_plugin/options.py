"""The plugin's options, each a flag, an ini key and an environment variable (the command line
wins over the environment, the environment over the ini file)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

DEFAULT_MIN_SCORE = 0.7
DEFAULT_TIMEOUT = 60.0  # seconds per judge or embeddings request, so a hung server ends a check
BATCH_MODES = ("module", "off")
ENV_PREFIX = "RAGAS_RELEVANCY_"


def check_min_score(value: Any) -> float:
    """A threshold is a number from -1 to 1 (cosines are raw, so a score can be negative)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or not -1.0 <= value <= 1.0:
        raise ValueError(f"min_score must be a number from -1 to 1, got {value!r}")
    return float(value)


def _min_score(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = text  # type: ignore[assignment]  (check_min_score names it)
    return check_min_score(value)


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


# a rate limit: a whole number of requests or tokens per minute
_per_minute = _number("must be a whole number of at least 1 per minute", lambda v: v >= 1, int)


def _otel(text: str) -> str:
    """An OTLP/HTTP base URL, as the traces URL spans are sent to."""
    from ..scoring.otlp import otlp_traces_url

    return otlp_traces_url(text.strip(), source="the traces URL") or text


def _one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    """A parser of one of ``choices`` (any case)."""

    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}, got {text!r}")
        return value

    return parse


@dataclass(frozen=True)
class Option:
    """One setting; ``setting`` names the :class:`..cli.setup.Settings` field it fills, if any."""

    name: str
    help: str
    metavar: str
    parse: Callable[[str], Any] = str
    setting: str | None = None
    path: bool = False

    @property
    def flag(self) -> str:
        return "--relevancy-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return "relevancy_" + self.name

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()


OPTIONS: tuple[Option, ...] = (
    Option(
        "judge",
        "Judge, as 'ragas-relevancy score --judge' takes it, e.g. openai:gpt-4o-mini (keys "
        "from the environment); 'offline' scores with the offline stand-in. None set: every "
        "check fails as not measured.",
        "SPEC",
        setting="judge",
    ),
    Option(
        "embeddings",
        "Embeddings, as 'ragas-relevancy score --embeddings' takes them (default: local when "
        "the 'local' extra is installed; without it, checks fail as not measured unless this "
        "is set, 'hash' included).",
        "SPEC",
        setting="embeddings",
    ),
    Option(
        "base_url",
        "Judge server URL, for any OpenAI-compatible server (and for embeddings of the same "
        "provider).",
        "URL",
        setting="base_url",
    ),
    Option(
        "timeout",
        f"Give up on a judge or embeddings request after SECONDS; the client retries it, then "
        f"the check fails as not measured (default: {DEFAULT_TIMEOUT:g}).",
        "SECONDS",
        parse=_number("timeout must be a number of seconds above 0", lambda v: v > 0),
        setting="timeout",
    ),
    *(
        Option(
            name,
            f"{what} per minute the checks keep to (the provider's limit); not set: learned "
            "from the provider's x-ratelimit headers and 429s.",
            "N",
            parse=_per_minute,
            setting=name,
        )
        for name, what in (
            ("rpm", "Judge requests"),
            ("tpm", "Judge tokens"),
            ("embedding_rpm", "Embedding requests"),
            ("embedding_tpm", "Embedding tokens"),
        )
    ),
    Option(
        "cache",
        "Keep judge replies in DIR; a re-run of unchanged checks makes no judge call.",
        "DIR",
        setting="cache",
        path=True,
    ),
    Option(
        "min_score",
        f"Threshold for checks that set none (default: {DEFAULT_MIN_SCORE}).",
        "SCORE",
        parse=_min_score,
    ),
    Option(
        "baseline",
        "A JSONL report of an earlier run (score --out, or --relevancy-report): the session "
        "fails when its checks are significantly worse than it (paired by question) by more "
        "than the margin.",
        "REPORT",
        path=True,
    ),
    Option(
        "margin",
        "The drop in mean score from the baseline the session tolerates (default: 0).",
        "DROP",
        parse=_number("margin must be a number at or above 0", lambda v: v >= 0),
    ),
    Option(
        "baseline_settings",
        "warn (default) or refuse: what the gate does with a baseline scored with other "
        "settings (judge, embeddings, strictness, probe prompt, language); refuse stops the "
        "session before its first test.",
        "WHAT",
        parse=_one_of(("warn", "refuse")),
    ),
    Option(
        "report",
        "Write the session's scored checks to PATH as a JSONL report (a baseline for a later "
        "session).",
        "PATH",
        path=True,
    ),
    Option(
        "batch",
        "module (default): score the checks of consecutive relevancy tests of a module "
        "together, report per test; off: score each check when it is made.",
        "MODE",
        parse=_one_of(BATCH_MODES),
    ),
    Option(
        "otel",
        "Send traces (OpenTelemetry, OTLP over HTTP; the [otel] extra) to URL, e.g. "
        "http://localhost:4318: a span per check, under the test's span when one is current, "
        "with its sample's judge and embeddings spans inside. Without it, checks are traced "
        "only to a tracer provider the session set up itself.",
        "URL",
        parse=_otel,
    ),
)


def add_options(parser: pytest.Parser) -> None:
    """Declare every option as a flag and an ini key."""
    group = parser.getgroup("relevancy", "answer relevancy checks (ragas-relevancy-ext)")
    for option in OPTIONS:
        group.addoption(
            option.flag,
            dest=f"relevancy_{option.name}",
            metavar=option.metavar,
            default=None,
            help=f"{option.help} ini: {option.ini}; environment: {option.env}.",
        )
        parser.addini(option.ini, f"{option.help} (also {option.flag}, {option.env})")


@dataclass(frozen=True)
class Values:
    """The options set on the command line, in the environment or the ini file, and where."""

    given: Mapping[str, Any]
    sources: Mapping[str, str] = field(default_factory=dict)
    min_score: float = DEFAULT_MIN_SCORE
    margin: float = 0.0
    batch: str = BATCH_MODES[0]
    timeout: float = DEFAULT_TIMEOUT

    @classmethod
    def read(cls, config: pytest.Config, environ: Mapping[str, str] | None = None) -> Values:
        """Every option from ``config`` and ``environ``; a bad value is a ``pytest.UsageError``."""
        environ = os.environ if environ is None else environ
        given: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for option in OPTIONS:
            found = _raw(config, option, environ)
            if found is None:
                continue
            text, source, base = found
            try:
                value = option.parse(text)
            except ValueError as exc:
                raise pytest.UsageError(f"{source}: {exc}") from None
            if option.path:
                value = Path(base, os.path.expanduser(value))
            given[option.name] = value
            sources[option.name] = source
        defaults = ("min_score", "margin", "batch", "timeout")
        return cls(given, sources, **{name: given[name] for name in defaults if name in given})

    def settings(self) -> dict[str, Any]:
        """Keyword arguments for :class:`..cli.setup.Settings`: what was set, and the timeout."""
        found = {
            option.setting: self.given[option.name]
            for option in OPTIONS
            if option.setting and option.name in self.given
        }
        return {**found, "timeout": self.timeout}


def _raw(
    config: pytest.Config, option: Option, environ: Mapping[str, str]
) -> tuple[str, str, Path] | None:
    """``(text, where it came from, folder a relative path is read from)`` or None."""
    flag = config.getoption(f"relevancy_{option.name}")
    if flag is not None:
        return str(flag), option.flag, config.invocation_params.dir
    env = environ.get(option.env, "").strip()
    if env:
        return env, option.env, Path.cwd()
    ini = config.getini(option.ini)
    if isinstance(ini, str) and ini.strip():
        base = config.inipath.parent if config.inipath else config.rootpath
        return ini.strip(), f"ini {option.ini}", base
    return None
