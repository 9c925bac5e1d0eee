"""Set up a judge, embeddings and the metric from command-line settings, and score rows.

Rows are scored concurrently and handed back one by one as each finishes, so a writer can save
every row the moment it is done. A row that fails gets a NaN report; no row is ever lost, and
no report carries an API key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..aio import DEFAULT_MAX_CONCURRENCY
from ..report import RelevancyReport
from .datafile import Row
from .providers import Built, build_embeddings, build_judge


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
    strictness: int = 3
    probe_prompt: str = "diverse"
    language: str = "auto"
    concurrency: int = DEFAULT_MAX_CONCURRENCY
    cache: Path | None = None


DEFAULT_SETTINGS = Settings()


@dataclass
class Setup:
    """The built judge (cached or not) and embeddings, with labels for people."""

    settings: Settings
    judge: Built
    embeddings: Built
    cached: Any = None

    @property
    def judge_label(self) -> str:
        label = self.judge.label
        if self.settings.cache is not None:
            label += f", replies cached in {self.settings.cache}"
        return label

    def cache_line(self) -> str | None:
        """``"judge cache DIR: 12 replies reused, 0 judge calls"`` when the cache is on."""
        if self.cached is None:
            return None
        return (
            f"judge cache {self.settings.cache}: {self.cached.hits} replies reused, "
            f"{self.cached.misses} judge calls"
        )

    def metric(self, probe_prompt: str | None = None) -> Any:
        """A fresh :class:`AnswerRelevancy` on this judge (cached when the cache is on)."""
        from ..metric import AnswerRelevancy

        return AnswerRelevancy(
            llm=self.judge_for_runs(),
            embeddings=self.embeddings.value,
            strictness=self.settings.strictness,
            probe_prompt=probe_prompt or self.settings.probe_prompt,
            max_concurrency=self.settings.concurrency,
            language=self.settings.language,
        )

    def judge_for_runs(self) -> Any:
        """The judge the commands should ask: the cached one when the cache is on."""
        return self.cached if self.cached is not None else self.judge.value


def prepare(settings: Settings) -> Setup:
    """Build judge and embeddings (ProviderError for a bad spec or a missing key)."""
    judge = build_judge(
        settings.judge,
        base_url=settings.base_url,
        max_retries=settings.max_retries,
        timeout=settings.timeout,
    )
    embeddings_url = settings.embeddings_base_url
    if embeddings_url is None and settings.base_url:
        # one server for both when the two specs name the same provider
        if settings.embeddings.partition(":")[0].lower() == judge.spec.provider:
            embeddings_url = settings.base_url
    embeddings = build_embeddings(
        settings.embeddings,
        base_url=embeddings_url,
        one_text_per_call=settings.one_text_per_call,
        concurrency=settings.concurrency,
        max_retries=settings.max_retries,
        timeout=settings.timeout,
    )
    setup = Setup(settings, judge, embeddings)
    if settings.cache is not None:
        from .cache import CachedJudge, disk_store

        setup.cached = CachedJudge(judge.value, disk_store(settings.cache), str(judge.spec))
        if settings.base_url:
            setup.cached.model += f"@{settings.base_url}"
    return setup


@dataclass
class Scored:
    """One row and its report."""

    row: Row
    report: RelevancyReport


async def score_rows(
    metric: Any,
    rows: Sequence[Row],
    on_done: Callable[[Scored], None] | None = None,
) -> list[Scored]:
    """Score ``rows`` concurrently; ``on_done`` sees each as it finishes; results in row order."""
    inputs = [{"user_input": row.user_input, "response": row.response} for row in rows]
    done: list[Scored] = []
    async for index, result in metric.ascore_each(inputs):
        scored = Scored(rows[index], result.report)  # keys are masked where errors enter
        if on_done is not None:
            on_done(scored)
        done.append(scored)
    return sorted(done, key=lambda s: s.row.number)
