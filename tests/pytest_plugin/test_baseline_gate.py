"""The pytest plugin's regression gate: a session's checks against a baseline report, in real
pytest sessions (``pytester``) with the offline judge and hash embeddings named explicitly."""

from __future__ import annotations

import importlib.metadata
import json
import re
import textwrap
from pathlib import Path

import httpcore  # noqa: F401
import httpx  # noqa: F401
import pytest
from common import EXAMPLES

# Inner sessions run in this process and unload the modules they imported; numpy cannot load
# twice in a process, so what the checks and the gate load is loaded here first.
import ragas_relevancy_ext.cli.diff  # noqa: F401
import ragas_relevancy_ext.error_bars  # noqa: F401
from ragas_relevancy_ext import AnswerRelevancy  # noqa: F401

pytestmark = pytest.mark.slow

OFFLINE = ("--relevancy-judge", "offline", "--relevancy-embeddings", "hash")
PLUGIN = "ragas_relevancy_ext.pytest_plugin"
ENTRY_POINTS = [p for p in importlib.metadata.entry_points(group="pytest11") if p.value == PLUGIN]
OFF_TOPIC = "Our blenders come in three colours: red, black and white."


@pytest.fixture(autouse=True)
def plugin_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in test_pytest_plugin: the plugin by its entry point, or by name where the installed
    metadata predates it; no cache folder in inner sessions."""
    if not ENTRY_POINTS:
        monkeypatch.setenv("PYTEST_PLUGINS", PLUGIN)
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:cacheprovider -p no:unraisableexception")


def rows() -> list[tuple[str, str]]:
    lines = (EXAMPLES / "support_qa.jsonl").read_text(encoding="utf-8").splitlines()[:8]
    return [(r["user_input"], r["response"]) for r in map(json.loads, lines)]


def suite(pytester: pytest.Pytester, off_topic: bool) -> None:
    """Eight checks that pass their own threshold (-1) whatever the answer."""
    pairs = [(q, OFF_TOPIC if off_topic else a) for q, a in rows()]
    pytester.makepyfile(
        test_bot=textwrap.dedent(
            f"""
            import pytest
            PAIRS = {pairs!r}

            @pytest.mark.parametrize("question,answer", PAIRS)
            def test_answer(relevancy, question, answer):
                relevancy(question, answer, min_score=-1)
            """
        )
    )


def baseline(pytester: pytest.Pytester) -> Path:
    """A baseline written by a session with the on-topic answers (``--relevancy-report``)."""
    suite(pytester, off_topic=False)
    path = pytester.path / "baseline.jsonl"
    result = pytester.runpytest(*OFFLINE, "--relevancy-report", str(path))
    result.assert_outcomes(passed=8)
    assert f"wrote {path}" in result.stdout.str()
    return path


def test_the_session_report_is_a_report_diff_and_show_read(pytester):
    path = baseline(pytester)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 8 and lines[0]["format"] == "ragas-relevancy-report/1"
    assert lines[0]["user_input"] == rows()[0][0] and "score_stderr" in lines[0]
    assert lines[0]["extra"]["nodeid"].startswith("test_bot.py::test_answer")
    assert lines[0]["judge"].startswith("offline")


def test_the_same_answers_pass_the_gate(pytester):
    path = baseline(pytester)
    result = pytester.runpytest(*OFFLINE, "--relevancy-baseline", str(path))
    result.assert_outcomes(passed=8)
    assert result.ret == 0
    out = result.stdout.str()
    assert f"baseline {path}: 8 paired check(s)" in out and "no significant drop" in out


def test_worse_answers_fail_the_session_and_say_by_how_much(pytester):
    path = baseline(pytester)
    suite(pytester, off_topic=True)
    result = pytester.runpytest(*OFFLINE, "--relevancy-baseline", str(path))
    result.assert_outcomes(passed=8)  # every check passes its own threshold
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    found = re.search(r"change (-\d\.\d{4}) \(95% CI (-\d\.\d{4}) to (-\d\.\d{4}), p = ", out)
    assert found, out
    change, low, high = map(float, found.groups())
    assert low <= change <= high < 0
    assert "FAILED: significantly worse than the baseline" in out


def test_a_margin_above_the_drop_passes_and_the_ini_sets_it(pytester):
    path = baseline(pytester)
    suite(pytester, off_topic=True)
    result = pytester.runpytest(
        *OFFLINE, "--relevancy-baseline", str(path), "--relevancy-margin", "0.99"
    )
    assert result.ret == 0 and "no significant drop by more than 0.99" in result.stdout.str()
    pytester.makeini(f"[pytest]\nrelevancy_baseline = {path}\nrelevancy_margin = 0.99\n")
    result = pytester.runpytest(*OFFLINE)
    assert result.ret == 0 and "no significant drop by more than 0.99" in result.stdout.str()


def test_bad_gate_settings_are_named_and_a_foreign_file_is_left_alone(pytester):
    suite(pytester, off_topic=False)
    result = pytester.runpytest(*OFFLINE, "--relevancy-baseline", "missing.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--relevancy-baseline" in result.stderr.str() and "no such file" in result.stderr.str()
    result = pytester.runpytest(*OFFLINE, "--relevancy-margin", "-0.1")
    assert "margin must be a number at or above 0" in result.stderr.str()
    result = pytester.runpytest(*OFFLINE, "--relevancy-margin", "0.1")  # no baseline to gate on
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--relevancy-margin needs --relevancy-baseline" in result.stderr.str()
    notes = pytester.path / "notes.jsonl"
    notes.write_text("my notes\n", encoding="utf-8")
    result = pytester.runpytest(*OFFLINE, "--relevancy-report", str(notes))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert notes.read_text(encoding="utf-8") == "my notes\n"
