"""Set up a judge, embeddings and the metric from command-line settings, and score rows,
handing each back as it finishes (a failed row gets a NaN report; none is lost)."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import logging
import math
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import cause_phrase
from ..scoring.aio import DEFAULT_MAX_CONCURRENCY
from ..scoring.redaction import redact
from ..scoring.report import RelevancyReport, clip, not_scored_cause
from .datafile import InputRow
from .providers import (
    Built,
    build_embeddings,
    build_judge,
    local_extra_installed,
    provider_request,
    show_url,
)

if TYPE_CHECKING:
    import asyncio

    from ..run.limits import RateLimits
    from ..run.streaming import EarlyStop
    from ..store.cache import CachedJudge, ReplyStore

__all__ = [
    "DEFAULT_SETTINGS",
    "CheckedSettings",
    "Settings",
    "Scorer",
    "check_settings",
    "prepare",
    "stream_rows",
    "unscored",
]


@dataclass(frozen=True)
class Settings:
    """Everything the commands share about how to score."""

    judge: str = "offline"
    base_url: str | None = None
    max_retries: int = 2
    timeout: float | None = None
    embeddings: str = "auto"
    embeddings_base_url: str | None = None
    one_text_per_call: bool = False
    batch_embeddings: bool = True
    strictness: int = 3
    probe_prompt: str = "diverse"
    language: str = "auto"
    concurrency: int = DEFAULT_MAX_CONCURRENCY
    rpm: int | None = None
    tpm: int | None = None
    embedding_rpm: int | None = None
    embedding_tpm: int | None = None
    patience: float = 600.0  # seconds without a successful request before a run gives up
    limits_file: Path | None = None  # the keys' limits, shared by processes (default: in --cache)
    cache: Path | None = None
    analytics: bool = False
    otel: str | None = None  # where spans go over OTLP/HTTP (see scoring/tracing.py)

    def rate_limits(self) -> RateLimits:
        """The run's :class:`.RateLimits`; ``--limits-file`` is by default
        ``rate-limits.sqlite3`` in ``--cache``, so runs on one cache share their keys' limits."""
        from ..run.limits import RateLimits

        shared = self.limits_file
        if shared is None and self.cache is not None:
            shared = self.cache / "rate-limits.sqlite3"
        limits = (self.rpm, self.tpm, self.embedding_rpm, self.embedding_tpm)
        return RateLimits(*limits, patience=self.patience, shared=shared)

    def connection(self, base_url: str | None) -> dict[str, Any]:
        """What a judge or embeddings client at ``base_url`` is built with."""
        return {"base_url": base_url, "max_retries": self.max_retries, "timeout": self.timeout}


DEFAULT_SETTINGS = Settings()


@dataclass(frozen=True)
class CheckedSettings:
    """:class:`Settings` checked, with labels and what changes a score, before anything loads."""

    settings: Settings
    judge_label: str
    embeddings_label: str
    embeddings_spec: str
    embeddings_url: str | None

    @property
    def scored_with(self) -> dict[str, Any]:
        """The settings that change a score, as each report line records them."""
        s = self.settings
        return {
            "judge": s.judge.strip().lower(),
            "base_url": show_url(s.base_url) if s.base_url else None,
            "embeddings": self.embeddings_spec,
            "embeddings_url": show_url(self.embeddings_url) if self.embeddings_url else None,
            "strictness": s.strictness,
            "probe_prompt": s.probe_prompt,
            "language": s.language,
        }

    @property
    def settings_tag(self) -> str:
        """A short hash of :attr:`scored_with`, part of each row's key (``row_key``)."""
        text = json.dumps(self.scored_with, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def check_settings(settings: Settings) -> CheckedSettings:
    """Check the specs and keys, importing no SDK, RAGAS or numpy: ProviderError (a bad spec) or
    MissingKeyError (naming the variable)."""
    connection = settings.connection
    judge = provider_request("judge", settings.judge, **connection(settings.base_url))
    url = _embeddings_url(settings, judge.spec.provider)
    embeddings = provider_request("embeddings", settings.embeddings, **connection(url))
    judge.check_key()
    embeddings.check_key()
    spec = str(embeddings.spec)
    if spec == "auto":  # the score depends on which one auto picks
        spec = "local" if local_extra_installed() else "hash"
    return CheckedSettings(
        settings,
        judge_label=_cached(judge.label(), settings),
        embeddings_label=embeddings.label(settings.one_text_per_call),
        embeddings_spec=spec,
        embeddings_url=url,
    )


def _embeddings_url(settings: Settings, judge_provider: str) -> str | None:
    """``--embeddings-base-url``, else ``--base-url`` when both specs name one provider."""
    if settings.embeddings_base_url is not None or not settings.base_url:
        return settings.embeddings_base_url
    if settings.embeddings.partition(":")[0].strip().lower() == judge_provider:
        return settings.base_url
    return None


def _cached(label: str, settings: Settings) -> str:
    return label + (f", replies cached in {settings.cache}" if settings.cache is not None else "")


def unscored(
    settings: Settings, user_input: str, response: str, error: str, **fields: Any
) -> RelevancyReport:
    """The NaN report of a row not scored (set aside, or failed on a Ray actor)."""
    s = settings
    return RelevancyReport(
        user_input, response, math.nan, s.strictness, s.probe_prompt, False, error=error, **fields
    )


@dataclass
class Scorer:
    """The built judge (cached or not) and embeddings, with labels for people."""

    settings: Settings
    judge: Built
    embeddings: Built
    cached: CachedJudge | None = None
    journal: CachedJudge | None = None  # the reply journal's judge, in front of the cached one

    @property
    def judge_label(self) -> str:
        return redact(_cached(self.judge.label, self.settings))

    @property
    def embeddings_label(self) -> str:
        return redact(self.embeddings.label)

    def cache_line(self) -> str | None:
        """``"judge cache DIR: 12 replies reused, 0 judge calls"`` when the cache is on."""
        if self.cached is None:
            return None
        off = ", off since a reply could not be stored" if self.cached.off else ""
        return (
            f"judge cache {self.settings.cache}: {self.cached.hits} replies reused, "
            f"{self.cached.misses} judge calls{off}"
        )

    def judge_for_runs(self) -> Any:
        """The judge to ask: the journal's, else the cached one, else the judge itself."""
        judges = (self.journal, self.cached)
        return next((judge for judge in judges if judge is not None), self.judge.value)

    def metric(self) -> Any:  # Any: Ray's SettingsMetric replaces its rate_limits
        """A fresh :class:`AnswerRelevancy` on this judge (cached when the cache is on)."""
        from ..metric import AnswerRelevancy

        s = self.settings
        return AnswerRelevancy(
            llm=self.judge_for_runs(),
            embeddings=self.embeddings.value,
            strictness=s.strictness,
            probe_prompt=s.probe_prompt,
            max_concurrency=s.concurrency,
            language=s.language,
            batch_embeddings=s.batch_embeddings,
            rate_limits=s.rate_limits(),
        )


LOCAL_MODEL_MODULE = "sentence_transformers"
LOG = logging.getLogger("ragas_relevancy_ext")  # a row not scored: one WARNING, with its cause


def prepare(
    settings: Settings,
    store: ReplyStore | None = None,
    say: Callable[[str], None] | None = None,
    journal: ReplyStore | None = None,
) -> Scorer:
    """Build judge and embeddings (ProviderError for a bad spec or a missing key). ``store``:
    ``settings.cache``'s if opened already; ``say``: told what is waited for; ``journal``: a
    reply store written before each reply is used, and read first (no reply is paid twice)."""
    say = say or (lambda text: None)
    check_settings(settings)  # a bad spec or a missing key fails before any thread starts
    # instructor's per-attempt log lines are not printed: each failure is said once, masked
    logging.getLogger("instructor").addHandler(logging.NullHandler())
    local = None  # the local model's library loads in a thread while RAGAS loads here
    provider = settings.embeddings.partition(":")[0].strip().lower()
    if (
        provider in ("local", "auto")
        and local_extra_installed()
        and LOCAL_MODEL_MODULE not in sys.modules
    ):
        local = threading.Thread(
            target=_import_local_model, name="ragas-relevancy-local-model", daemon=True
        )
        local.start()
        say("loading RAGAS and the local model (sentence-transformers)…")
    try:
        judge = build_judge(settings.judge, **settings.connection(settings.base_url))
    finally:  # never return, even with an error, while the import thread changes sys.modules
        if local is not None:
            say("loading the local model (sentence-transformers)…")
            local.join()
    embeddings = build_embeddings(
        settings.embeddings,
        one_text_per_call=settings.one_text_per_call,
        concurrency=settings.concurrency,
        **settings.connection(_embeddings_url(settings, judge.spec.provider)),
    )
    scorer = Scorer(settings, judge, embeddings)
    from ..store.cache import CachedJudge, disk_store

    model = str(judge.spec) + (f"@{settings.base_url}" if settings.base_url else "")
    if settings.cache is not None:
        store = store if store is not None else disk_store(settings.cache)
        scorer.cached = CachedJudge(judge.value, store, model)
    if journal is not None:
        scorer.journal = CachedJudge(scorer.judge_for_runs(), journal, model, "reply journal")
    return scorer


def _import_local_model() -> None:
    """Import the local model's library; a failure is left to the embeddings' build to say."""
    with contextlib.suppress(Exception):
        importlib.import_module(LOCAL_MODEL_MODULE)


async def stream_rows(
    metric: Any,
    rows: Iterable[InputRow],
    stop: asyncio.Event | None = None,
    early_stop: EarlyStop | None = None,
) -> AsyncIterator[tuple[InputRow, RelevancyReport]]:
    """Each row with its report as it finishes; once ``stop`` is set (or ``early_stop`` gives
    up), rows that have asked nothing yet are not started."""
    in_flight: dict[int, InputRow] = {}

    def inputs() -> Iterator[dict[str, str]]:
        for index, row in enumerate(rows):
            in_flight[index] = row
            yield {"user_input": row.user_input, "response": row.response}

    async for index, result in metric.ascore_each(inputs(), stop=stop, early_stop=early_stop):
        row, report = in_flight.pop(index), result.report  # keys masked where errors enter
        if not math.isfinite(report.score):  # its cause and error (its reason may load a model)
            cause = not_scored_cause(report)
            why = report.error or cause_phrase(cause)
            LOG.warning("row %d not scored (%s): %s", row.number, cause, clip(why, 500))
        yield row, report
