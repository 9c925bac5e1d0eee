"""Shared test set-up: offline RAGAS, and the shared fixture cases."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

FIXTURES = Path(__file__).parent / "fixtures"
# Set to 1 (CI does) and a missing [local] extra fails the suite instead of skipping its tests.
REQUIRE_LOCAL = "RAGAS_RELEVANCY_REQUIRE_LOCAL"
# Set to 1 (CI does) and a run with any skipped test fails.
NO_SKIPS = "RAGAS_RELEVANCY_NO_SKIPS"


def load_cases() -> list[dict[str, Any]]:
    """Every shared fixture case (tests/fixtures/cases.json)."""
    return json.loads((FIXTURES / "cases.json").read_text(encoding="utf-8"))


def load_toy() -> dict[str, Any]:
    """Seed 004's toy vectors case, whose mean cosine is 0.7463."""
    return json.loads((FIXTURES / "toy_vectors.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def cases() -> list[dict[str, Any]]:
    return load_cases()


# real pytest sessions for the pytest plugin's tests (tests/test_pytest_plugin.py)
pytest_plugins = ("pytester",)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under ``RAGAS_RELEVANCY_NO_SKIPS=1`` a skipped test or module fails the run."""
    if os.environ.get(NO_SKIPS) != "1" or exitstatus != 0:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if skipped:
        reporter.write_line(f"{NO_SKIPS}=1: {len(skipped)} skipped, which fails this run")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
