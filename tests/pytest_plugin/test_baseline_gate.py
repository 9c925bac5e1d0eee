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
    write_suite(pytester, [(q, OFF_TOPIC if off_topic else a) for q, a in rows()])


def write_suite(pytester: pytest.Pytester, pairs: list[tuple[str, str]]) -> None:
    """A check per (question, answer) that passes its own threshold (-1) whatever the answer."""
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
    assert (
        f"baseline {path} (A) against this session (B): paired by question text: 8 pair(s)" in out
    )
    assert "scores: no significant drop (one-sided p = 1.0000" in out
    assert "failures: no significant rise" in out and "warning" not in out


def test_worse_answers_fail_the_session_and_say_by_how_much(pytester):
    path = baseline(pytester)
    suite(pytester, off_topic=True)
    result = pytester.runpytest(*OFFLINE, "--relevancy-baseline", str(path))
    result.assert_outcomes(passed=8)  # every check passes its own threshold
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    found = re.search(
        r"B - A (-\d\.\d{4}) ± \d\.\d{4} \(95% CI \[(-\d\.\d{4}), (-\d\.\d{4})\]", out
    )
    assert found, out
    change, low, high = map(float, found.groups())
    assert low <= change <= high < 0
    assert "scores: B is significantly lower than A (one-sided p = " in out
    assert "exit 1 under 0.025): exit 1" in out


def test_a_margin_above_the_drop_passes_and_the_ini_sets_it(pytester):
    path = baseline(pytester)
    suite(pytester, off_topic=True)
    result = pytester.runpytest(
        *OFFLINE, "--relevancy-baseline", str(path), "--relevancy-margin", "0.99"
    )
    assert (
        result.ret == 0 and "scores: no significant drop by more than 0.99" in result.stdout.str()
    )
    pytester.makeini(f"[pytest]\nrelevancy_baseline = {path}\nrelevancy_margin = 0.99\n")
    result = pytester.runpytest(*OFFLINE)
    assert (
        result.ret == 0 and "scores: no significant drop by more than 0.99" in result.stdout.str()
    )


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
    result = pytester.runpytest(*OFFLINE, "--relevancy-baseline-settings", "refuse")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--relevancy-baseline-settings needs --relevancy-baseline" in result.stderr.str()
    result = pytester.runpytest(*OFFLINE, "--relevancy-baseline-settings", "maybe")
    assert "must be one of warn, refuse, got 'maybe'" in result.stderr.str()
    notes = pytester.path / "notes.jsonl"
    notes.write_text("my notes\n", encoding="utf-8")
    result = pytester.runpytest(*OFFLINE, "--relevancy-report", str(notes))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert notes.read_text(encoding="utf-8") == "my notes\n"


def test_a_baseline_sharing_few_questions_fails_the_session(pytester):
    path = baseline(pytester)
    pairs = [(f"Another question {i}?", a) for i, (_, a) in enumerate(rows())]
    write_suite(pytester, pairs)
    result = pytester.runpytest(*OFFLINE, "--relevancy-baseline", str(path))
    result.assert_outcomes(passed=8)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert f"no question of {path} is in this session: nothing to pair: the gate cannot" in (
        result.stdout.str()
    )
    write_suite(pytester, rows() + pairs + pairs[:1])  # 8 of 17 checks ask a baseline question
    result = pytester.runpytest(*OFFLINE, "--relevancy-baseline", str(path))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "only 8 of the session's 17 checks ask a question of it (under 50%)" in (
        result.stdout.str()
    )


def test_a_damaged_baseline_stops_the_session_in_one_line(pytester):
    path = baseline(pytester)
    lines = path.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[2])
    record["score"] = "high"
    path.write_text("\n".join([*lines[:2], json.dumps(record), *lines[3:]]) + "\n", "utf-8")
    result = pytester.runpytest(*OFFLINE, "--relevancy-baseline", str(path))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert f"--relevancy-baseline {path}: row 3: score 'high' is not a number from -1 to 1" in err
    assert "Traceback" not in err + result.stdout.str() and "passed" not in result.stdout.str()


def test_a_baseline_from_other_settings_warns_or_is_refused(pytester):
    path = baseline(pytester)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for record in records:
        record["settings"]["judge"] = "openai:gpt-4o-mini"
        record["strictness"] = 5
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    result = pytester.runpytest(*OFFLINE, "--relevancy-baseline", str(path))
    assert result.ret == 0
    assert (
        "warning: A and B were scored with other settings (judge openai:gpt-4o-mini vs offline; "
        "strictness 5 vs 3)"
    ) in result.stdout.str()
    refuse = ("--relevancy-baseline", str(path), "--relevancy-baseline-settings", "refuse")
    result = pytester.runpytest(*OFFLINE, *refuse)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "passed" not in result.stdout.str()
    assert (
        f"--relevancy-baseline {path} was scored with other settings (judge openai:gpt-4o-mini "
        "vs offline; strictness 5 vs 3); --relevancy-baseline-settings refuse stops the session"
    ) in result.stderr.str()
