"""The pytest plugin, in real pytest sessions (``pytester``) that load it through its entry point.

Expected scores come from the metric itself (PretendJudge and HashEmbeddings, the plugin's
``offline``/``hash`` specs), so the plugin is checked against the number it must report. Judge
calls are counted on the loopback server.
"""

from __future__ import annotations

import importlib.metadata
import math
import re
import shutil
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import httpcore  # noqa: F401  (see below)
import httpx  # noqa: F401
import pytest
from common import EXAMPLES
from openai import AsyncOpenAI
from ragas.llms import llm_factory

from ragas_relevancy_ext import AnswerRelevancy
from ragas_relevancy_ext.scoring.report import RelevancyReport
from ragas_relevancy_ext.testing.loopback import Fault, LoopbackServer
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge

QUESTION = "How do I get a refund for a damaged blender?"
GOOD = (
    "Refunds for damaged blenders are issued once we receive a photo of the damage. Reply "
    "with a picture of the blender and the refund goes back to your card within 5 days."
)
BAD = "Our blenders come in three colours: red, black and white."
OFFLINE = ("--relevancy-judge", "offline", "--relevancy-embeddings", "hash")


# Inner sessions run in this process and unload the modules they imported. httpx and httpcore
# stay loaded together, so httpx's map of httpcore's exceptions (a timeout among them) is never
# left pointing at an unloaded httpcore's classes by an earlier session. Likewise instructor's
# provider registry (filled as its modules load, from 1.4 on): one judge is built here, so every
# module it needs is loaded before the first inner session.
llm_factory(
    "m", provider="openai", client=AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1:9")
)

PLUGIN = "ragas_relevancy_ext.pytest_plugin"
ENTRY_POINTS = [p for p in importlib.metadata.entry_points(group="pytest11") if p.value == PLUGIN]


@pytest.fixture(autouse=True)
def plugin_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions load the plugin through its entry point. Where the installed metadata predates
    it (an editable install made before), the entry-point test below fails and names that,
    and the other sessions load the module by name, so they still test the plugin."""
    if not ENTRY_POINTS:
        monkeypatch.setenv("PYTEST_PLUGINS", PLUGIN)
    # inner sessions: no cache folder, and no gc.collect() rounds at exit (seconds each, once
    # RAGAS is loaded)
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:cacheprovider -p no:unraisableexception")


def expected(user_input: str, response: str) -> RelevancyReport:
    """What the plugin's offline judge and hash embeddings must report for this pair."""
    metric = AnswerRelevancy(llm=PretendJudge(), embeddings=HashEmbeddings())
    return metric.score(user_input=user_input, response=response).report


@pytest.fixture(scope="module")
def good() -> RelevancyReport:
    return expected(QUESTION, GOOD)


@pytest.fixture(scope="module")
def bad() -> RelevancyReport:
    return expected(QUESTION, BAD)


def suite(pytester: pytest.Pytester, body: str, **files: str) -> None:
    """A test module with the question and both answers in scope, plus other files."""
    header = f"""
        import pytest
        from ragas_relevancy_ext.pytest_plugin import assert_relevant
        QUESTION, GOOD, BAD = {QUESTION!r}, {GOOD!r}, {BAD!r}
    """
    pytester.makepyfile(test_bot=textwrap.dedent(header) + textwrap.dedent(body), **files)


def summary(output: str) -> list[str]:
    """The relevancy summary's check lines, in printed order."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if "answer relevancy:" in line and "==" in line)
    found = []
    for line in lines[start + 1 :]:
        if not re.match(r"\s*(NaN|-?\d\.\d{4})\s+min ", line):
            break
        found.append(line)
    return found


def test_the_entry_point_is_declared_in_the_installed_metadata():
    assert [p.name for p in ENTRY_POINTS] == ["relevancy"], "reinstall: pip install -e ."
    dist = ENTRY_POINTS[0].dist
    assert dist is not None and dist.name == "ragas-relevancy-ext"


@pytest.mark.slow
def test_loading_the_plugin_imports_neither_ragas_nor_the_command_line(pytester):
    pytester.makeconftest(
        f"""
        import sys
        PLUGIN = {PLUGIN!r}
        def pytest_sessionfinish(session):
            heavy = ("ragas", "numpy", "openai", "torch", "typer", "ragas_relevancy_ext.cli")
            loaded = sorted(m for m in heavy if m in sys.modules)
            manager = session.config.pluginmanager
            plugin = manager.get_plugin("relevancy") or manager.get_plugin(PLUGIN)
            print("PLUGIN", getattr(plugin, "__name__", None), "HEAVY", loaded)
        """
    )
    pytester.makepyfile("def test_plain():\n    assert True\n")
    # langsmith's plugin alone takes seconds to import; not ours to measure
    result = pytester.runpytest_subprocess("-s", "-p", "no:langsmith_plugin")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*PLUGIN ragas_relevancy_ext.pytest_plugin HEAVY []*"])


@pytest.mark.slow
def test_a_failing_check_shows_its_probe_table_reason_and_threshold(pytester, good, bad):
    pass_at = good.score - 0.01
    fail_at = bad.score + 0.01
    suite(
        pytester,
        f"""
        def test_good(relevancy):
            relevancy(QUESTION, GOOD, min_score={pass_at})

        @pytest.mark.relevancy(min_score={fail_at})
        def test_bad():
            assert_relevant(QUESTION, BAD)

        def test_bad_by_argument(relevancy):
            relevancy(QUESTION, BAD, min_score={fail_at})

        @pytest.mark.xfail(reason="a known drift")
        def test_bad_but_expected(relevancy):
            relevancy(QUESTION, BAD, min_score={fail_at})
        """,
    )
    result = pytester.runpytest(*OFFLINE)
    result.assert_outcomes(passed=1, failed=2, xfailed=1)
    out = result.stdout.str()
    assert f"answer relevancy {bad.score:.4f} is below {fail_at:.4f}" in out
    for probe in bad.probes:  # the table: cosine, noncommittal flag, question
        assert f"{probe.cosine:.4f}   {probe.noncommittal}  {probe.question}" in out
    assert f"reason: {bad.reason}" in out
    assert f"threshold: {fail_at:.4f} (@pytest.mark.relevancy)" in out
    assert f"threshold: {fail_at:.4f} (min_score argument)" in out
    # the summary: one line per check, worst first, and the count below threshold
    lines = summary(out)
    assert [line.split()[0] for line in lines] == [f"{bad.score:.4f}"] * 3 + [f"{good.score:.4f}"]
    assert "test_bot.py::test_good" in lines[-1] and "ok" in lines[-1]
    assert "answer relevancy: 4 check(s), 3 below threshold, 0 not measured" in out


@pytest.mark.slow
@pytest.mark.parametrize("call", ["assert_relevant(QUESTION, BAD)", "relevancy(QUESTION, BAD)"])
def test_a_failing_check_stops_its_test_at_its_line_as_assert_does(pytester, bad, call):
    """Under -x the code after the check does not run, nor does the next test; the failure
    names the line of the check."""
    suite(
        pytester,
        f"""
        from pathlib import Path

        @pytest.mark.relevancy(min_score={bad.score + 0.01})
        def test_bad(relevancy):
            {call}
            Path("after-the-check").write_text("ran")

        def test_next():
            Path("next-test").write_text("ran")
        """,
    )
    line = 9  # of the check in test_bot.py (the header's 4 lines, then the body above)
    assert (pytester.path / "test_bot.py").read_text().splitlines()[line - 1].strip() == call
    result = pytester.runpytest(*OFFLINE, "-x")
    result.assert_outcomes(failed=1)
    assert not (pytester.path / "after-the-check").exists()
    assert not (pytester.path / "next-test").exists()
    result.stdout.fnmatch_lines(
        [f">       {call}", f"E   *RelevancyFailure: test_bot.py:{line}: answer relevancy *"]
    )
    result.stdout.fnmatch_lines([f"test_bot.py:{line}: RelevancyFailure"])


@pytest.mark.slow
def test_a_check_whose_judge_failed_fails_as_not_measured_never_as_a_low_score(
    pytester, monkeypatch
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    suite(
        pytester,
        """
        @pytest.mark.relevancy(min_score=-1.0)
        def test_any_score_passes():
            assert_relevant(QUESTION, GOOD)
        """,
    )
    with LoopbackServer(faults=[Fault("unauthorized", fraction=1.0, endpoint="chat")]) as server:
        result = pytester.runpytest(
            "--relevancy-judge",
            "openai:gpt-4o-mini",
            "--relevancy-base-url",
            server.openai_base_url,
            "--relevancy-embeddings",
            "hash",
        )
    result.assert_outcomes(failed=1)  # even with a threshold every score meets
    out = result.stdout.str()
    assert "answer relevancy NOT MEASURED (auth): the judge refused the API key: " in out
    assert "AuthenticationError" in out and "RelevancyNotMeasured" in out
    assert "is below" not in out
    assert "answer relevancy: 1 check(s), 0 below threshold, 1 not measured" in out
    assert summary(out)[0].split()[:6] == [
        "NaN",
        "min",
        "-1.0000",
        "NOT",
        "MEASURED",
        "test_bot.py::test_any_score_passes",
    ]
    # logged once, at WARNING on the package's logger, with the cause
    assert out.count("WARNING  ragas_relevancy_ext:") == 1
    result.stdout.fnmatch_lines(
        ["WARNING  ragas_relevancy_ext:* test_bot.py:*: answer relevancy NOT MEASURED (auth): *"]
    )


@pytest.mark.slow
def test_a_missing_key_is_one_usage_error_before_any_test_runs(pytester, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    suite(pytester, "def test_a(relevancy):\n    relevancy(QUESTION, GOOD)\n")
    result = pytester.runpytest("--relevancy-judge", "openai:gpt-4o-mini")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*relevancy: openai needs an API key: set OPENAI_API_KEY*"])


@pytest.mark.slow
def test_a_bad_threshold_option_is_a_usage_error(pytester):
    suite(pytester, "def test_a():\n    pass\n")
    result = pytester.runpytest("--relevancy-min-score", "1.5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--relevancy-min-score: min_score must be a number from -1 to 1, *"]
    )


@pytest.mark.slow
@pytest.mark.parametrize("where", ["command line", "environment", "ini"])
def test_options_come_from_the_command_line_the_environment_and_the_ini_file(
    pytester, monkeypatch, good, where
):
    """The command line wins over the environment, the environment over the ini file."""
    monkeypatch.delenv("RAGAS_RELEVANCY_MIN_SCORE", raising=False)
    monkeypatch.delenv("RAGAS_RELEVANCY_EMBEDDINGS", raising=False)
    below = good.score + 0.01  # this threshold fails the check; the overridden ones would pass
    ini, env, args = "-1.0", "-1.0", ["--relevancy-judge", "offline"]
    if where == "ini":
        ini = f"{below:.4f}"
    elif where == "environment":
        env = f"{below:.4f}"
    pytester.makeini(
        f"[pytest]\nrelevancy_min_score = {ini}\nrelevancy_embeddings = hash\n"
        "relevancy_cache = judge-replies\n"
    )
    if where != "ini":
        monkeypatch.setenv("RAGAS_RELEVANCY_MIN_SCORE", env)
    if where == "command line":
        args += ["--relevancy-min-score", f"{below:.4f}"]
    suite(pytester, "def test_good(relevancy):\n    relevancy(QUESTION, GOOD)\n")
    result = pytester.runpytest(*args)
    result.assert_outcomes(failed=1)
    source = {
        "command line": "--relevancy-min-score",
        "environment": "RAGAS_RELEVANCY_MIN_SCORE",
        "ini": "ini relevancy_min_score",
    }[where]
    result.stdout.fnmatch_lines([f"E *threshold: {below:.4f} ({source})", "embeddings: hash*"])
    # a relative cache folder in the ini file is read from the ini file's folder
    result.stdout.fnmatch_lines([f"judge cache {pytester.path / 'judge-replies'}: *"])


@pytest.mark.slow
def test_scores_go_into_the_junit_xml(pytester, good, bad):
    suite(
        pytester,
        """
        def test_good(relevancy):
            relevancy(QUESTION, GOOD, min_score=-1.0)

        @pytest.mark.relevancy(min_score=1.0)
        def test_bad():
            assert_relevant(QUESTION, BAD)
        """,
    )
    pytester.runpytest(*OFFLINE, "--junitxml=junit.xml")
    tree = ET.parse(pytester.path / "junit.xml")
    found = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in tree.iter("testcase")
    }
    used = {
        "relevancy_judge": "offline (PretendJudge: no LLM, no network)",
        "relevancy_embeddings": "hash (HashEmbeddings: bag of words, offline)",
    }
    assert found["test_good"] == {
        "relevancy_score": f"{good.score:.4f}",
        "relevancy_min_score": "-1.0000",
        "relevancy_verdict": "passed",
        **used,
    }
    assert found["test_bad"] == {
        "relevancy_score": f"{bad.score:.4f}",
        "relevancy_min_score": "1.0000",
        "relevancy_verdict": "below",
        **used,
    }
    failure = next(c for c in tree.iter("testcase") if c.get("name") == "test_bad").find("failure")
    assert failure is not None


def many_checks(pytester: pytest.Pytester, count: int) -> None:
    suite(
        pytester,
        f"""
        @pytest.mark.relevancy(min_score=-1.0)
        @pytest.mark.parametrize("n", range({count}))
        def test_answer(n):
            assert_relevant(f"{{QUESTION}} (case {{n}})", f"{{GOOD}} (case {{n}})")
        """,
    )


def loopback_args(server: LoopbackServer, *more: str) -> list[str]:
    judge = ["--relevancy-judge", "openai:gpt-4o-mini"]
    return [*judge, "--relevancy-base-url", server.openai_base_url, *OFFLINE[2:], *more]


@pytest.mark.slow
def test_xdist_workers_share_the_reply_cache_and_send_their_checks_to_the_summary(
    pytester, monkeypatch
):
    """Two workers (-n 2) score six checks of three answers, each answer asked about twice (the
    judge's prompt is the answer's, so the second asking may be the other worker's); a second
    run takes every reply from the cache both wrote, however the tests fall to the workers, and
    the main process's summary counts every worker's checks and cache hits."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    suite(
        pytester,
        """
        @pytest.mark.relevancy(min_score=-1.0)
        @pytest.mark.parametrize("n", range(6))
        def test_answer(n):
            assert_relevant(f"{QUESTION} (case {n})", f"{GOOD} (answer {n % 3})")
        """,
    )
    cache = pytester.path / "replies"  # given relative: read from where pytest started
    with LoopbackServer() as server:
        args = loopback_args(server, "--relevancy-cache", "replies", "-n", "2", "-v")
        first = pytester.runpytest(*args)
        first.assert_outcomes(passed=6)
        asked = server.count("chat")
        again = pytester.runpytest(*args)
        again.assert_outcomes(passed=6)
        assert server.count("chat") == asked  # nothing new reached the judge
    for run in (first, again):
        out = run.stdout.str()
        workers = set(re.findall(r"\[(gw\d)\] \[ *\d+%\] PASSED", out))
        assert workers == {"gw0", "gw1"}  # both workers scored checks
        assert "answer relevancy: 6 check(s), 0 below threshold, 0 not measured" in out
    first.stdout.fnmatch_lines(
        [f"judge cache {cache}: {6 - asked} replies reused, {asked} judge calls"]
    )
    again.stdout.fnmatch_lines([f"judge cache {cache}: 6 replies reused, 0 judge calls"])
    scores = [sorted(summary(run.stdout.str())) for run in (first, again)]
    assert scores[0] == scores[1] and len(scores[0]) == 6


@pytest.mark.slow
def test_xdist_workers_keep_to_one_rate_limit_for_their_key(pytester, monkeypatch):
    """A provider that admits 120 requests a minute in one-second slices (two a second) refuses
    none of the checks' requests when two workers send with one key: they pace as one."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    many_checks(pytester, 10)
    with LoopbackServer(rpm=120, per_second=True) as server:
        result = pytester.runpytest(*loopback_args(server, "--relevancy-rpm", "120", "-n", "2"))
        statuses = [r.status for r in server.log if r.endpoint == "chat"]
    result.assert_outcomes(passed=10)
    assert statuses == [200] * 10  # no 429


@pytest.mark.slow
def test_the_example_suite_passes_offline(pytester):
    for name in ("test_support_bot.py", "support_qa.jsonl"):
        shutil.copy(EXAMPLES / name, pytester.path / name)
    result = pytester.runpytest(*OFFLINE)
    result.assert_outcomes(passed=13)
    assert "answer relevancy: 6 check(s), 0 below threshold, 0 not measured" in result.stdout.str()


def junit_properties(path: Path) -> dict[str, dict[str, str]]:
    tree = ET.parse(path)
    return {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in tree.iter("testcase")
    }


@pytest.mark.slow
def test_no_judge_set_is_not_measured_not_configured_from_every_entry_point(pytester, monkeypatch):
    """No stand-in judge is assumed: its score would pass or fail a threshold for no reason.
    The fixture, assert_relevant and relevancy.score() all say so, and the summary in the same
    words."""
    monkeypatch.delenv("RAGAS_RELEVANCY_JUDGE", raising=False)
    suite(
        pytester,
        """
        @pytest.mark.relevancy(min_score=-1.0)
        def test_any_score_passes():
            assert_relevant(QUESTION, GOOD)

        def test_fixture(relevancy):
            relevancy(QUESTION, GOOD, min_score=-1.0)

        def test_the_number(relevancy):
            assert relevancy.score(QUESTION, GOOD).score < 0.45

        def test_plain():
            assert True
        """,
    )
    result = pytester.runpytest("--relevancy-embeddings", "hash", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1, failed=3)  # even with a threshold every score meets
    out = result.stdout.str()
    said = "answer relevancy NOT MEASURED (not configured): no judge is set"
    assert out.count("RelevancyNotMeasured: test_bot.py:") == 3
    for line in (7, 10, 13):
        assert f"test_bot.py:{line}: {said}" in out
    for how in ("--relevancy-judge openai:gpt-4o-mini", "relevancy_judge", "RAGAS_RELEVANCY_JUDGE"):
        assert how in out
    assert "--relevancy-judge offline" in out  # the stand-in, when asked for by name
    assert "assert nan" not in out
    assert "answer relevancy: 2 check(s), 0 below threshold, 2 not measured" in out
    for line in summary(out):
        assert "NOT MEASURED  test_bot.py::test_" in line
        assert line.endswith("(not configured): no judge is set: set one with --relevancy…")
    found = junit_properties(pytester.path / "junit.xml")
    assert found["test_any_score_passes"]["relevancy_verdict"] == "not measured"
    assert found["test_any_score_passes"]["relevancy_cause"] == "not configured"
    assert found["test_any_score_passes"]["relevancy_judge"] == "not set up"
    assert found["test_plain"] == {}


@pytest.mark.slow
def test_embeddings_that_default_to_hash_fail_as_not_measured(pytester, monkeypatch):
    """Without the [local] extra the command line's auto picks hash: not without being asked."""
    from ragas_relevancy_ext.cli import providers

    monkeypatch.delenv("RAGAS_RELEVANCY_EMBEDDINGS", raising=False)
    monkeypatch.setattr(providers, "local_extra_installed", lambda: False)
    suite(pytester, "def test_good(relevancy):\n    relevancy(QUESTION, GOOD, min_score=-1.0)\n")
    implicit = pytester.runpytest("--relevancy-judge", "offline")
    implicit.assert_outcomes(failed=1)
    out = implicit.stdout.str()
    assert "answer relevancy NOT MEASURED (not configured): no embeddings are set" in out
    assert "--relevancy-embeddings hash" in out and "RAGAS_RELEVANCY_EMBEDDINGS" in out
    explicit = pytester.runpytest(*OFFLINE)  # hash by name: allowed
    explicit.assert_outcomes(passed=1)


@pytest.mark.slow
@pytest.mark.parametrize("value", ["0", "soon", "nan"])
def test_a_bad_timeout_is_a_usage_error(pytester, monkeypatch, value):
    suite(pytester, "def test_a():\n    pass\n")
    monkeypatch.setenv("RAGAS_RELEVANCY_TIMEOUT", value)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*RAGAS_RELEVANCY_TIMEOUT: timeout must be a number of seconds above 0, got '{value}'*"]
    )


@pytest.mark.slow
@pytest.mark.parametrize("hung", ["chat", "embeddings"])
def test_a_server_that_never_answers_ends_each_check_at_its_timeout(pytester, monkeypatch, hung):
    """The server takes each request and holds it (up to 120 s): --relevancy-timeout bounds a
    whole check, the client's retries included, so two checks end within 30 s. The bound is
    the run's own: pytest-timeout fails a test of the session after 15 s (its message then
    replaces the check's), and the session's process is ended after 120 s."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    suite(
        pytester,
        """
        @pytest.mark.relevancy(min_score=-1.0)
        @pytest.mark.parametrize("n", [1, 2])
        def test_any_score_passes(n):
            assert_relevant(f"{QUESTION} ({n})", GOOD)
        """,
    )
    hang = Fault("hang", fraction=1.0, endpoint=hung)
    with LoopbackServer(faults=[hang], hang_seconds=120) as server:
        args = [
            *loopback_args(server, "--relevancy-timeout", "5"),
            "--relevancy-embeddings",  # the last one given wins
            "openai:text-embedding-3-small",
        ]
        result = pytester.runpytest_subprocess(*args, "--timeout", "15", timeout=120)
        log = server.log
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    said = (
        "RelevancyNotMeasured: test_bot.py:8: answer relevancy NOT MEASURED (timeout): the judge "
        "or embeddings gave no score within 5 s (--relevancy-timeout: the whole check, retries "
        "included)"
    )
    assert out.count(said) == 2
    assert "answer relevancy: 2 check(s), 0 below threshold, 2 not measured" in out
    # every request to the hung endpoint was held and never answered
    held = [r for r in log if r.endpoint == hung]
    assert held and all(r.fault == "hang" and r.status is None for r in held)
    if hung == "embeddings":  # the judge answered each check
        assert [r.status for r in log if r.endpoint == "chat"] == [200, 200]


def test_rate_limits_reach_the_settings_and_a_bad_one_is_refused(pytester, monkeypatch):
    from ragas_relevancy_ext.pytest_plugin.options import read_options

    monkeypatch.setenv("RAGAS_RELEVANCY_TPM", "150000")
    config = pytester.parseconfig("--relevancy-rpm", "600", "--relevancy-embedding-tpm", "9000")
    given, sources = read_options(config)
    assert (given["rpm"], given["tpm"], given["embedding_tpm"]) == (600, 150000, 9000)
    assert sources["tpm"] == "RAGAS_RELEVANCY_TPM" and "embedding_rpm" not in given
    with pytest.raises(pytest.UsageError, match="whole number of at least 1 per minute"):
        read_options(pytester.parseconfig("--relevancy-rpm", "0"))


def test_the_batch_option_of_earlier_versions_is_refused_not_ignored(pytester, monkeypatch):
    from ragas_relevancy_ext.pytest_plugin.options import read_options

    monkeypatch.setenv("RAGAS_RELEVANCY_BATCH", "module")
    with pytest.raises(pytest.UsageError, match="RAGAS_RELEVANCY_BATCH: .* pytest-xdist"):
        read_options(pytester.parseconfig())


SPY = """
import builtins, importlib, pkgutil, sys

import ragas_relevancy_ext

found = set()
real_import = builtins.__import__


def spy(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__") or ""
    if level == 0 and name.partition(".")[0] == "_pytest" and importer.startswith("ragas_"):
        found.add(f"{importer} imports {name}")
    return real_import(name, globals, locals, fromlist, level)


builtins.__import__ = spy
for module in pkgutil.walk_packages(ragas_relevancy_ext.__path__, "ragas_relevancy_ext."):
    if not module.name.endswith("__main__"):
        try:
            importlib.import_module(module.name)
        except ImportError:  # an extra not installed
            pass
import pytest

code = pytest.main(["-p", "xdist", "-p", "no:cacheprovider", *sys.argv[1:]])
print("EXIT", int(code), "FROM _pytest", sorted(found))
"""


@pytest.mark.slow
def test_no_module_of_the_package_imports_pytests_private_package(pytester, bad):
    """Every module, loaded and run through a session with checks that pass and fail (the
    -x and -n paths included), imports from ``pytest`` only, never from ``_pytest``."""
    suite(
        pytester,
        f"""
        def test_good(relevancy):
            relevancy(QUESTION, GOOD, min_score=-1.0)
            assert relevancy.score(QUESTION, GOOD).score > -1.0

        @pytest.mark.relevancy(min_score={bad.score + 0.01})
        def test_bad():
            assert_relevant(QUESTION, BAD)
        """,
    )
    pytester.makepyfile(spy=SPY)
    for more in (["-x"], ["-n", "2"]):
        result = pytester.run(sys.executable, "spy.py", *OFFLINE, *more, "test_bot.py")
        result.stdout.fnmatch_lines(["EXIT 1 FROM _pytest []"])
        assert "answer relevancy: " in result.stdout.str()  # the checks were made


@pytest.mark.parametrize("value", [True, math.nan, math.inf, 1.5, -1.01, "0.5"])
def test_a_threshold_argument_that_is_no_number_from_minus_one_to_one_is_refused(value):
    from ragas_relevancy_ext.pytest_plugin.options import check_min_score

    with pytest.raises(ValueError, match="min_score must be a number from -1 to 1, got "):
        check_min_score(value)


def test_a_threshold_argument_from_minus_one_to_one_is_a_float():
    from ragas_relevancy_ext.pytest_plugin.options import check_min_score

    assert [check_min_score(v) for v in (-1, 0, 0.7, 1)] == [-1.0, 0.0, 0.7, 1.0]
    assert all(type(check_min_score(v)) is float for v in (-1, 1))
