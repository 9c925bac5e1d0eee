"""Shared test set-up: offline RAGAS, the shared fixture cases, the no-skips rule."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# pytest prints each failure's whole message in its short summary when CI or BUILD_NUMBER is
# set, and pytest-xdist's workers set COLUMNS=80; the tests read nested runs' and the command
# line's output, so it is printed the same anywhere (piped, at the command line's own width).
for _variable in ("CI", "BUILD_NUMBER", "COLUMNS", "LINES"):
    os.environ.pop(_variable, None)

# pytester's in-process runs forget modules first imported inside them, and numpy's compiled
# parts cannot load twice in one process; scipy.special (error bars) brings them in here.
import scipy.special  # noqa: E402, F401  # type: ignore[import-untyped]
from common import NO_SKIPS, load_cases, where  # noqa: E402  (after the environment is set)


@pytest.fixture(scope="session")
def cases() -> list[dict[str, Any]]:
    return load_cases()


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The user's own tracer provider, set as ``trace.set_tracer_provider`` sets it (undone
    after the test), sending every span to an in-memory exporter (yielded); texts not opted in."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ragas_relevancy_ext.scoring.tracing import CAPTURE_CONTENT

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    monkeypatch.delenv(CAPTURE_CONTENT, raising=False)
    yield exporter
    provider.shutdown()


@pytest.fixture
def model_loads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """py3langid's model made unloaded again, its loader recording where each load ran (see
    ``common.where``); the model it gives names every text English."""
    import py3langid.langid

    from ragas_relevancy_ext.scoring import languages

    class English:
        def classify(self, text: str) -> tuple[str, float]:
            return "en", 1.0

    loads: list[tuple[str, bool]] = []

    def load(*args: Any, **kwargs: Any) -> English:
        loads.append(where())
        return English()

    monkeypatch.setattr(py3langid.langid, "IDENTIFIER", None)
    monkeypatch.setattr(py3langid.langid, "_load_identifier", load)
    monkeypatch.setattr(languages, "_DETECTORS", {})
    return loads


# real pytest sessions for the pytest plugin's tests (tests/pytest_plugin/)
pytest_plugins = ("pytester",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that takes a module's loopback ``server`` fixture is ``slow``, as are those marked."""
    for item in items:
        if "server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under ``RAGAS_RELEVANCY_NO_SKIPS=1`` a skipped test or module fails the run."""
    if os.environ.get(NO_SKIPS) != "1" or exitstatus != 0:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if skipped:
        reporter.write_line(f"{NO_SKIPS}=1: {len(skipped)} skipped, which fails this run")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
