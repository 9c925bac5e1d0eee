"""Scoring for the plugin: the command line's judge, embeddings and cache, built at the first
check, and one event loop in a background thread for the session (pooled connections stay on
the loop that opened them; a check made inside a running loop does not block it)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from ..scoring.report import RelevancyReport

HOW_TO_SET_JUDGE = (
    "set one with --relevancy-judge openai:gpt-4o-mini (ini relevancy_judge, environment "
    "RAGAS_RELEVANCY_JUDGE); --relevancy-judge offline scores with the offline stand-in"
)
HOW_TO_SET_EMBEDDINGS = (
    "set them with --relevancy-embeddings openai:text-embedding-3-small, or local with the "
    "[local] extra installed (ini relevancy_embeddings, environment RAGAS_RELEVANCY_EMBEDDINGS); "
    "--relevancy-embeddings hash uses the offline bag-of-words stand-in"
)


class NotConfigured(Exception):
    """No judge (or only the hash stand-in as embeddings) was set: the checks are not measured."""


class Engine:
    """Scores ``(user_input, response)`` pairs with the configured metric, many at once."""

    def __init__(self, settings: dict[str, Any]):
        self.settings_given = dict(settings)
        self._lock = threading.Lock()
        self._setup: Any = None
        self._metric: Any = None
        self._failure: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def prepare(self) -> None:
        """Build judge, embeddings and metric; a bad spec or a missing key is kept and raised."""
        with self._lock:
            if self._failure is not None:
                raise self._failure
            if self._setup is not None:
                return
            from ..cli.setup import Settings, prepare

            try:
                if "judge" not in self.settings_given:
                    raise NotConfigured(f"no judge is set: {HOW_TO_SET_JUDGE}")
                setup = prepare(Settings(**self.settings_given))
                if (
                    "embeddings" not in self.settings_given
                    and setup.embeddings.spec.provider == "hash"
                ):
                    raise NotConfigured(
                        f"no embeddings are set and the default fell back to hash "
                        f"({setup.embeddings_label}): {HOW_TO_SET_EMBEDDINGS}"
                    )
                self._setup = setup
                self._metric = setup.metric()
            except Exception as exc:
                self._failure = exc
                raise

    def labels(self) -> list[str]:
        """What judged and embedded, and the cache line: for the session summary."""
        if self._setup is None:
            return [f"not set up: {self._failure}"] if self._failure else []
        lines = [
            f"judge: {self._setup.judge_label}",
            f"embeddings: {self._setup.embeddings_label}",
        ]
        cache = self._setup.cache_line()
        return lines + ([cache] if cache else [])

    def properties(self) -> list[tuple[str, str]]:
        """JUnit XML properties: the judge and embeddings that scored (keys masked)."""
        if self._setup is None:
            return [("relevancy_judge", "not set up"), ("relevancy_embeddings", "not set up")]
        return [
            ("relevancy_judge", self._setup.judge_label),
            ("relevancy_embeddings", self._setup.embeddings_label),
        ]

    def score(self, pairs: Sequence[tuple[Any, Any]]) -> list[RelevancyReport]:
        """One report per pair, in order, from one ``abatch_score``; failures are NaN reports."""
        if not pairs:
            return []
        inputs = [{"user_input": q, "response": r} for q, r in pairs]
        try:
            self.prepare()
            results = self._run(self._metric.abatch_score(inputs))
        except Exception as exc:  # the setup or the loop: abatch_score keeps per-sample failures
            return [self._failed(pair, exc) for pair in pairs]
        return [result.report for result in results]

    def _failed(self, pair: tuple[Any, Any], exc: BaseException) -> RelevancyReport:
        from ..cli.setup import DEFAULT_SETTINGS
        from ..scoring.sample import failed_report

        defaults = DEFAULT_SETTINGS  # the plugin sets neither strictness nor the probe prompt
        return failed_report(*pair, defaults.strictness, defaults.probe_prompt, exc)

    def _run(self, coro: Any) -> Any:
        """Run ``coro`` on the session's loop and wait for it."""
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="ragas-relevancy-pytest", daemon=True
                )
                self._thread.start()
            loop = self._loop
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, loop)
        return future.result()

    def close(self) -> None:
        """Stop the loop and its thread (end of the test session)."""
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
