"""Scoring for the plugin: the command line's judge, embeddings and cache, built before the first
check, and one event loop in a background thread for the session (pooled connections stay on
the loop that opened them; a check made inside a running loop does not block it)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..scoring.report import RelevancyReport

if TYPE_CHECKING:
    from ..cli.setup import Scorer

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


@dataclass
class Used:
    """What judged and embedded and what the reply cache saved, summed over pytest-xdist
    workers: the summary's last lines and each test's JUnit properties."""

    judge: str = "not set up"
    embeddings: str = "not set up"
    problem: str | None = None  # why nothing was set up
    cache: str | None = None  # the cache folder, when one is used
    reused: int = 0
    asked: int = 0
    off: bool = False  # a reply could not be stored

    def add(self, other: dict[str, Any]) -> None:
        """Count a worker's :func:`dataclasses.asdict` in."""
        reused, asked = self.reused + other["reused"], self.asked + other["asked"]
        self.__dict__.update(other, reused=reused, asked=asked, off=self.off or other["off"])

    def properties(self) -> list[tuple[str, str]]:
        return [("relevancy_judge", self.judge), ("relevancy_embeddings", self.embeddings)]

    def lines(self) -> list[str]:
        if self.problem is not None:
            return [f"not set up: {self.problem}"]
        lines = [f"judge: {self.judge}", f"embeddings: {self.embeddings}"]
        if self.cache is not None:
            off = ", off since a reply could not be stored" if self.off else ""
            lines.append(
                f"judge cache {self.cache}: {self.reused} replies reused, {self.asked} judge "
                f"calls{off}"
            )
        return lines


class Engine:
    """Scores ``(user_input, response)`` pairs, each within ``timeout`` s, retries included."""

    def __init__(self, settings: dict[str, Any], timeout: float):
        self.settings_given = dict(settings)
        self.timeout = timeout
        self._lock = threading.Lock()
        self._setup: Scorer | None = None
        self._failure: BaseException | None = None
        self._metric: Any = None  # the metric on the built judge and embeddings
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def prepare(self) -> Scorer:
        """Build judge, embeddings and metric once; a failure is kept and raised at each call."""
        with self._lock:
            if self._failure is not None:
                raise self._failure
            if self._setup is not None:
                return self._setup
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
                self._metric = setup.metric()
                self._setup = setup
                return setup
            except Exception as exc:
                self._failure = exc
                raise

    def used(self) -> Used:
        """What scored this process's checks (keys masked)."""
        setup = self._setup
        if setup is None:
            return Used(problem=None if self._failure is None else str(self._failure))
        used = Used(setup.judge_label, setup.embeddings_label)
        if (cached := setup.cached) is not None:
            used.cache, used.off = str(setup.settings.cache), cached.off is not None
            used.reused, used.asked = cached.hits, cached.misses
        return used

    def score(self, user_input: Any, response: Any) -> RelevancyReport:
        """The pair's report, NaN with its cause on a failure or timeout (or NotConfigured)."""
        inputs = [{"user_input": user_input, "response": response}]
        try:
            if (cached := self.prepare().cached) is not None:
                cached.start_over()  # a check's replies do not hang on earlier checks'
            scoring = asyncio.wait_for(self._metric.abatch_score(inputs), self.timeout)
            return self._run(scoring)[0].report
        except NotConfigured:
            raise
        except asyncio.TimeoutError:
            failure: Exception = TimeoutError(f"no score within {self.timeout:g} s")
        except Exception as exc:  # the setup or the loop: abatch_score keeps sample failures
            failure = exc
        # the plugin sets neither strictness nor the probe prompt
        from ..cli.setup import DEFAULT_SETTINGS as DEFAULTS
        from ..scoring.sample import failed_report

        return failed_report(
            user_input, response, DEFAULTS.strictness, DEFAULTS.probe_prompt, failure
        )

    def _run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` on the session's loop (started on first use) and wait for it."""
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="ragas-relevancy-pytest", daemon=True
                )
                self._thread.start()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        """Stop the loop and its thread (end of the test session)."""
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            loop.close()
