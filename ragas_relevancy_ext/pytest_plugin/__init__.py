"""Answer relevancy as a test: the ``relevancy`` fixture, ``@pytest.mark.relevancy`` and
:func:`assert_relevant` (entry point ``relevancy`` in ``pytest11``). Loading it imports pytest and
the standard library only; judge, embeddings and RAGAS load with the first check."""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest

from ..scoring.report import RelevancyReport
from .baseline import (
    Gate,
    check_report_target,
    compare_with_baseline,
    read_baseline,
    write_report,
)
from .checks import (
    Check,
    RelevancyFailure,
    RelevancyNotMeasured,
    score_checks,
    summary_lines,
    summary_title,
)
from .engine import Engine
from .options import Values, add_options, check_min_score

__all__ = [
    "Relevancy",
    "RelevancyFailure",
    "RelevancyNotMeasured",
    "assert_relevant",
    "pytest_addoption",
    "pytest_collection_finish",
    "pytest_configure",
    "pytest_runtest_protocol",
    "pytest_sessionfinish",
    "pytest_terminal_summary",
    "pytest_unconfigure",
    "relevancy",
]

MARKER = "relevancy"
_HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class _State:
    """The plugin's state for one pytest session (kept in ``config.stash``)."""

    config: pytest.Config
    values: Values
    engine: Engine
    checks: list[Check] = field(default_factory=list)
    current: pytest.Item | None = None  # the test running now
    batching: pytest.Item | None = None  # the test whose checks wait for the module's batch
    held: list[tuple[pytest.Item, list[pytest.TestReport]]] = field(default_factory=list)
    pending: dict[str, list[Check]] = field(default_factory=dict)
    gate: Gate | None = None  # the checks against --relevancy-baseline, at session end
    traces: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)  # --relevancy-otel

    def check(self, user_input: Any, response: Any, min_score: float | None) -> None:
        """Record a check of the running test and score it now (raising its failure) or with the
        module's batch."""
        __tracebackhide__ = True
        item = self.current
        threshold, source = self.threshold(item, min_score)
        check = Check(
            nodeid=item.nodeid if item is not None else "(outside a test)",
            location=_caller(self.config),
            user_input=user_input,
            response=response,
            min_score=threshold,
            min_source=source,
            timeout=self.values.timeout,
        )
        self.checks.append(check)
        if item is not None and self.batching is item:
            self.pending.setdefault(item.nodeid, []).append(check)
            return
        score_checks(self.engine, [check])
        if item is not None:
            item.user_properties.extend(check.properties())
            used = self.engine.properties()
            item.user_properties.extend(p for p in used if p not in item.user_properties)
        if check.verdict != "passed":
            raise check.exception()

    def threshold(self, item: pytest.Item | None, given: float | None) -> tuple[float, str]:
        """The threshold and where it came from: argument, marker, option, default."""
        if given is not None:
            return check_min_score(given), "min_score argument"
        marker = item.get_closest_marker(MARKER) if item is not None else None
        if marker is not None:
            value = marker.kwargs.get("min_score", marker.args[0] if marker.args else None)
            if value is not None:
                return check_min_score(value), f"@pytest.mark.{MARKER}"
        return self.values.min_score, self.values.sources.get("min_score", "default")

    def flush(self) -> None:
        """Score the held tests' checks in one batch, then write their reports in order."""
        held, self.held = self.held, []
        checks = [c for item, _ in held for c in self.pending.pop(item.nodeid, [])]
        score_checks(self.engine, checks)
        for item, test_reports in held:
            mine = [c for c in checks if c.nodeid == item.nodeid]
            _apply(item, test_reports, mine, self.engine.properties())
            item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
            for report in test_reports:
                item.ihook.pytest_runtest_logreport(report=report)
            item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)


_STATE = pytest.StashKey[_State]()
_ACTIVE: list[_State] = []  # innermost session last (pytester runs sessions inside sessions)


def _caller(config: pytest.Config) -> str:
    """``path:line`` of the test code that made the check (the first frame outside the plugin)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and os.path.dirname(frame.f_code.co_filename) == _HERE:
        frame = frame.f_back
    path = frame.f_code.co_filename
    try:
        path = os.path.relpath(path, config.rootpath)
    except ValueError:  # another drive
        pass
    return f"{path}:{frame.f_lineno}"


def _apply(
    item: pytest.Item,
    reports: list[pytest.TestReport],
    checks: list[Check],
    used: list[tuple[str, str]],
) -> None:
    """Put the checks' scores and what scored them into the reports (JUnit properties) and fail
    the call if due."""
    properties = [p for check in checks for p in check.properties()]
    if checks:
        properties.extend(p for p in used if p not in properties)
    item.user_properties.extend(properties)
    for report in reports:
        report.user_properties.extend(properties)
    failed = [check for check in checks if check.verdict != "passed"]
    call = next((r for r in reports if r.when == "call"), None)
    if not failed or call is None:
        return
    text = "\n\n".join(check.message() for check in failed)
    if call.passed:
        # an xfail-marked test that now fails is xfailed, as pytest reports it
        call.outcome = "skipped" if hasattr(call, "wasxfail") else "failed"
        call.longrepr = text
    else:  # the test failed on its own as well: keep its traceback, add ours below
        call.sections.append(("answer relevancy", text))


def _batched(item: pytest.Item | None) -> bool:
    """Tests that use the fixture or carry the marker have their checks batched."""
    if item is None:
        return False
    return item.get_closest_marker(MARKER) is not None or MARKER in getattr(
        item, "fixturenames", ()
    )


class Relevancy:
    """The ``relevancy`` fixture: ``relevancy(user_input, response, min_score=None)`` checks;
    ``relevancy.score(user_input, response)`` returns the report, for tests that need the number."""

    def __init__(self, state: _State):
        self._state = state

    def __call__(self, user_input: str, response: str, min_score: float | None = None) -> None:
        """Check that ``response`` is relevant to ``user_input`` (see :func:`assert_relevant`)."""
        __tracebackhide__ = True
        self._state.check(user_input, response, min_score)

    def score(self, user_input: str, response: str) -> RelevancyReport:
        """Score now and return the report (``.score``, ``.probes``, ``.reason``); no verdict."""
        return self._state.engine.score([(user_input, response)])[0]


def assert_relevant(user_input: str, response: str, min_score: float | None = None) -> None:
    """Fail the running test unless ``response`` scores at least ``min_score`` (else the marker's,
    ``--relevancy-min-score``, 0.7); outside a batched test raise :class:`RelevancyFailure` or
    :class:`RelevancyNotMeasured` at once."""
    __tracebackhide__ = True
    if not _ACTIVE:
        raise RuntimeError(
            "assert_relevant runs inside pytest with the relevancy plugin "
            "(installed with ragas-relevancy-ext; not disabled by -p no:relevancy)"
        )
    _ACTIVE[-1].check(user_input, response, min_score)


@pytest.fixture
def relevancy(request: pytest.FixtureRequest) -> Relevancy:
    """Check answers for relevancy: ``relevancy(user_input, response, min_score=0.7)``."""
    state = request.config.stash.get(_STATE, None)
    assert state is not None, "the relevancy plugin is not configured"
    return Relevancy(state)


pytest_addoption = add_options


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(min_score=None): threshold for this test's relevancy checks; its checks "
        "are scored with the module's batch",
    )
    values = Values.read(config)
    if "report" in values.given:
        check_report_target(values.given["report"])
    baseline = values.given.get("baseline")
    if baseline is not None:  # read whole now: a damaged one stops the session at once
        refuse = values.given.get("baseline_settings") == "refuse"
        read_baseline(baseline, values.settings(), refuse)
    lonely = [name for name in ("margin", "baseline_settings") if name in values.given]
    if baseline is None and lonely:
        raise pytest.UsageError(f"{values.sources[lonely[0]]} needs --relevancy-baseline")
    state = _State(config, values, Engine(values.settings()))
    if "otel" in values.given:
        from ..errors import UsageError
        from ..scoring.otlp import exporting

        try:
            state.traces.enter_context(exporting(values.given["otel"], "ragas-relevancy-pytest"))
        except UsageError as exc:
            raise pytest.UsageError(f"{values.sources['otel']}: {exc}") from None
    config.stash[_STATE] = state
    _ACTIVE.append(state)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None:
        del config.stash[_STATE]
        _ACTIVE.remove(state)
        state.engine.close()
        state.traces.close()  # the spans waiting are sent


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build judge and embeddings before the first relevancy test, so a bad spec or a missing
    key is one usage error, not a failure per check."""
    state = session.config.stash.get(_STATE, None)
    if state is None or session.config.option.collectonly:
        return
    if not any(_batched(item) for item in session.items):
        return
    from ..cli.errors import UsageError

    try:
        state.engine.prepare()
    except UsageError as exc:
        raise pytest.UsageError(f"relevancy: {exc}") from None
    except Exception:
        pass  # kept by the engine: every check then fails as not measured, with the cause


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """Run a relevancy test without writing its reports; write them after the module's batch."""
    state = item.config.stash.get(_STATE, None)
    if state is None:
        return None
    state.current = item
    if state.values.batch == "off" or not _batched(item):
        return None  # pytest's own protocol
    from _pytest.runner import runtestprotocol

    state.batching = item
    try:
        reports = runtestprotocol(item, log=False, nextitem=nextitem)
    finally:
        state.batching = None
    state.held.append((item, reports))
    if not _batched(nextitem) or item.getparent(pytest.Module) is not nextitem.getparent(
        pytest.Module
    ):
        state.flush()
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Score and write held reports of a session stopped inside a batch (not after Ctrl-C)."""
    state = session.config.stash.get(_STATE, None)
    if state is None or exitstatus == pytest.ExitCode.INTERRUPTED:
        return
    if state.held:
        state.flush()
    given = state.values.given
    if "report" in given and state.checks:
        write_report(
            given["report"], state.checks, state.engine.properties(), state.values.settings()
        )
    if "baseline" in given and state.checks:
        state.gate = compare_with_baseline(
            state.checks, given["baseline"], state.values.margin, state.values.settings()
        )
        if state.gate.failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """One line per check, worst first, the counts, and what judged and embedded."""
    state = config.stash.get(_STATE, None)
    if state is None or not state.checks:
        return
    terminalreporter.write_sep("=", summary_title(state.checks))
    for line in [*summary_lines(state.checks), *state.engine.labels()]:
        terminalreporter.write_line(line)
    if state.gate is not None:
        for line in state.gate.lines():
            terminalreporter.write_line(line, red=state.gate.failed, bold=state.gate.failed)
    if "report" in state.values.given:
        terminalreporter.write_line(f"wrote {state.values.given['report']}")
