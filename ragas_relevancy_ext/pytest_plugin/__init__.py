"""Answer relevancy as a test: the ``relevancy`` fixture, ``@pytest.mark.relevancy`` and
:func:`assert_relevant` (entry point ``relevancy`` in ``pytest11``). A check passes or fails
where it is made, as ``assert`` does; pytest-xdist workers (``-n``) send their checks to the
session's summary. Loading it imports pytest and the standard library only."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Generator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest

from ..errors import UsageError
from ..scoring.report import RelevancyReport
from .baseline import Gate, check_report_target, compare_with_baseline, read_baseline, write_report
from .checks import (
    Check,
    RelevancyFailure,
    RelevancyNotMeasured,
    score_check,
    summary_lines,
    summary_title,
)
from .engine import Engine, Used
from .options import (
    DEFAULT_MIN_SCORE,
    DEFAULT_TIMEOUT,
    SETTINGS,
    add_options,
    check_min_score,
    read_options,
)

# what a test imports (pytest finds the hooks below by their names)
__all__ = ["Relevancy", "RelevancyFailure", "RelevancyNotMeasured", "assert_relevant", "relevancy"]

MARKER = "relevancy"


@dataclass
class _State:
    """The plugin's state for one pytest session (kept in ``config.stash``)."""

    config: pytest.Config
    given: dict[str, Any]
    sources: dict[str, str]
    engine: Engine
    checks: list[Check] = field(default_factory=list)
    current: pytest.Item | None = None  # the test running now
    workers: Used | None = None  # what scored the checks of pytest-xdist workers
    gate: Gate | None = None  # the checks against --relevancy-baseline, at session end
    # what ends with the session: --relevancy-otel's exporter, the rate limits' folder
    closing: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def check(self, user_input: Any, response: Any, min_score: float | None, kept: bool) -> Check:
        """Score a check of the running test now and raise its failure unless it passes; one
        not ``kept`` (``relevancy.score()``) has no threshold and stays out of the summary."""
        __tracebackhide__ = True
        threshold, source = self.threshold(min_score) if kept else (-1.0, "")
        item = self.current
        check = Check(
            nodeid=item.nodeid if item is not None else "(outside a test)",
            location=_caller(self.config),
            user_input=user_input,
            response=response,
            min_score=threshold,
            min_source=source,
            timeout=self.engine.timeout,
        )
        score_check(self.engine, check)
        if kept:
            self.checks.append(check)
        if kept and item is not None:
            found = item.user_properties
            found.extend(check.properties())
            found.extend(p for p in self.engine.used().properties() if p not in found)
        if check.verdict != "passed":
            raise check.exception()
        return check

    def threshold(self, given: float | None) -> tuple[float, str]:
        """The threshold and where it came from: argument, marker, option, default."""
        if given is not None:
            return check_min_score(given), "min_score argument"
        marker = self.current.get_closest_marker(MARKER) if self.current is not None else None
        if marker is not None:
            value = marker.kwargs.get("min_score", marker.args[0] if marker.args else None)
            if value is not None:
                return check_min_score(value), f"@pytest.mark.{MARKER}"
        source = self.sources.get("min_score", "default")
        return self.given.get("min_score", DEFAULT_MIN_SCORE), source


_STATE = pytest.StashKey[_State]()
_ACTIVE: list[_State] = []  # innermost session last (pytester runs sessions inside sessions)


def _caller(config: pytest.Config) -> str:
    """``path:line`` of the test code that made the check (the first frame outside the plugin)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith(__name__):
        frame = frame.f_back
    path = frame.f_code.co_filename
    with contextlib.suppress(ValueError):  # on another drive: kept whole
        path = os.path.relpath(path, config.rootpath)
    return f"{path}:{frame.f_lineno}"


class Relevancy:
    """The ``relevancy`` fixture: ``relevancy(user_input, response, min_score=None)`` checks as
    :func:`assert_relevant` does; ``relevancy.score(user_input, response)`` returns the report."""

    def __init__(self, state: _State):
        self._state = state

    def __call__(self, user_input: str, response: str, min_score: float | None = None) -> None:
        __tracebackhide__ = True
        self._state.check(user_input, response, min_score, kept=True)

    def score(self, user_input: str, response: str) -> RelevancyReport:
        """The report (``.score``, ``.probes``, ``.reason``); a score not measured raises
        :class:`RelevancyNotMeasured`, as a check does."""
        __tracebackhide__ = True
        report = self._state.check(user_input, response, None, kept=False).report
        assert report is not None  # a check that passed has its report
        return report


def assert_relevant(user_input: str, response: str, min_score: float | None = None) -> None:
    """Fail the running test here unless ``response`` scores at least ``min_score`` (else the
    marker's, ``--relevancy-min-score``, 0.7): :class:`RelevancyFailure` (an ``AssertionError``)
    for a low score, :class:`RelevancyNotMeasured` for none."""
    __tracebackhide__ = True
    if not _ACTIVE:
        raise RuntimeError(
            "assert_relevant runs inside pytest with the relevancy plugin "
            "(installed with ragas-relevancy-ext; not disabled by -p no:relevancy)"
        )
    _ACTIVE[-1].check(user_input, response, min_score, kept=True)


@pytest.fixture
def relevancy(request: pytest.FixtureRequest) -> Relevancy:
    """Check answers for relevancy: ``relevancy(user_input, response, min_score=0.7)``."""
    state = request.config.stash.get(_STATE, None)
    assert state is not None, "the relevancy plugin is not configured"
    return Relevancy(state)


pytest_addoption = add_options


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(min_score=None): threshold for this test's relevancy checks"
    )
    given, sources = read_options(config)
    if "report" in given:
        check_report_target(given["report"])
    settings = {name: given[name] for name in SETTINGS if name in given}
    if "baseline" in given:  # read whole now: a damaged one stops the session at once
        read_baseline(given["baseline"], settings, given.get("baseline_settings") == "refuse")
    lonely = [name for name in ("margin", "baseline_settings") if name in given]
    if "baseline" not in given and lonely:
        raise pytest.UsageError(f"{sources[lonely[0]]} needs --relevancy-baseline")
    closing = contextlib.ExitStack()
    settings["limits_file"] = _limits_file(config, given, closing)
    engine = Engine(settings, given.get("timeout", DEFAULT_TIMEOUT))
    state = _State(config, given, sources, engine, closing=closing)
    if "judge" in given and config.getoption("dist", "no") != "no":
        from ..cli.setup import Settings, check_settings

        try:  # pytest-xdist's main process: a bad spec or a missing key stops it here
            check_settings(Settings(**settings))
        except UsageError as exc:
            raise pytest.UsageError(f"relevancy: {exc}") from None
    if "otel" in given:
        from ..scoring.otlp import exporting

        try:
            closing.enter_context(exporting(given["otel"], "ragas-relevancy-pytest"))
        except UsageError as exc:
            raise pytest.UsageError(f"{sources['otel']}: {exc}") from None
    config.stash[_STATE] = state
    _ACTIVE.append(state)


def _limits_file(
    config: pytest.Config, given: dict[str, Any], closing: contextlib.ExitStack
) -> Path | None:
    """One file of rate limits for the session and its workers (with --relevancy-cache, the
    command line's file in that folder)."""
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        return Path(worker["relevancy_limits"]) if "relevancy_limits" in worker else None
    if "judge" not in given or "cache" in given:
        return None
    folder = closing.enter_context(tempfile.TemporaryDirectory(prefix="ragas-relevancy-"))
    return Path(folder, "rate-limits.sqlite3")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: a worker keeps to the session's rate limits."""
    state = node.config.stash.get(_STATE, None)
    limits = state.engine.settings_given["limits_file"] if state is not None else None
    if limits is not None:
        node.workerinput["relevancy_limits"] = str(limits)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None:
        del config.stash[_STATE]
        _ACTIVE.remove(state)
        state.engine.close()
        state.closing.close()  # the spans waiting are sent


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build judge and embeddings before the first test: a missing key is one usage error."""
    state = session.config.stash.get(_STATE, None)
    if state is None or session.config.option.collectonly:
        return
    if not any(
        i.get_closest_marker(MARKER) or MARKER in getattr(i, "fixturenames", ())
        for i in session.items
    ):
        return
    try:
        state.engine.prepare()
    except UsageError as exc:
        if not hasattr(session.config, "workerinput"):  # a worker cannot stop the session
            raise pytest.UsageError(f"relevancy: {exc}") from None
    except Exception:
        pass  # kept by the engine: every check then fails as not measured, with the cause


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """Checks made while ``item`` runs are its checks."""
    state = item.config.stash[_STATE]  # set by pytest_configure, before any test runs
    state.current = item
    try:
        return (yield)
    finally:
        state.current = None


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist: a worker's checks and what scored them join the session's."""
    state = node.config.stash.get(_STATE, None)
    sent = getattr(node, "workeroutput", {}).get(MARKER)
    if state is None or sent is None:
        return
    state.checks.extend(Check.from_dict(check) for check in sent["checks"])
    state.workers = state.workers or Used()
    state.workers.add(sent["used"])


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A worker hands its checks on; the session writes the report, gates (not after Ctrl-C)."""
    config = session.config
    state = config.stash.get(_STATE, None)
    if state is None or exitstatus == pytest.ExitCode.INTERRUPTED:
        return
    if hasattr(config, "workeroutput"):
        checks = [check.to_dict() for check in state.checks]
        config.workeroutput[MARKER] = {"checks": checks, "used": asdict(state.engine.used())}
        return
    given, settings = state.given, state.engine.settings_given
    if "report" in given and state.checks:
        used = (state.workers or state.engine.used()).properties()
        write_report(given["report"], state.checks, used, settings)
    if "baseline" in given and state.checks:
        margin = given.get("margin", 0)
        state.gate = compare_with_baseline(state.checks, given["baseline"], margin, settings)
        if state.gate.failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


class Terminal(Protocol):
    """What the summary uses of pytest's terminal reporter (public as ``pytest.TerminalReporter``
    only from pytest 8.1)."""

    def write_sep(self, sep: str, title: str | None = None, **markup: bool) -> None: ...

    def write_line(self, line: str, **markup: bool) -> None: ...


def pytest_terminal_summary(terminalreporter: Terminal, config: pytest.Config) -> None:
    """One line per check, worst first, the counts, and what judged and embedded."""
    state = config.stash.get(_STATE, None)
    if state is None or not state.checks:
        return
    terminalreporter.write_sep("=", summary_title(state.checks))
    for line in [*summary_lines(state.checks), *(state.workers or state.engine.used()).lines()]:
        terminalreporter.write_line(line)
    if state.gate is not None:
        for line in state.gate.lines():
            terminalreporter.write_line(line, red=state.gate.failed, bold=state.gate.failed)
    if "report" in state.given:
        terminalreporter.write_line(f"wrote {state.given['report']}")
