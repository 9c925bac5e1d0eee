"""Why a sample is NaN: the cause read from the whole error chain, on every path it leaves by.

The SDK paths run against ``LoopbackServer`` through the real openai SDK and instructor, which
wraps the SDK's error in ``InstructorRetryException``: the cause, the requests counted and the
early stop must come out of the whole chain.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI
from ragas.embeddings import OpenAIEmbeddings
from ragas.llms import llm_factory
from test_errors import instructor_wrapped, status_error
from typer.testing import CliRunner

from ragas_relevancy_ext import AnswerRelevancy
from ragas_relevancy_ext.cli import app
from ragas_relevancy_ext.errors import (
    Cause,
)
from ragas_relevancy_ext.run.streaming import EarlyStop
from ragas_relevancy_ext.scoring.report import RelevancyReport
from ragas_relevancy_ext.scoring.sample import ProbeOptions, failed_report, score_sample
from ragas_relevancy_ext.scoring.usage import UsageMeter
from ragas_relevancy_ext.testing.loopback import Fault, LoopbackServer
from ragas_relevancy_ext.testing.offline import HashEmbeddings

EXAMPLE = Path(__file__).parent.parent / "examples" / "support_qa.jsonl"
QUESTION = "Where is order A17?"
RESPONSE = "Order A17 left the Leeds warehouse on 3 March and arrives on Friday."
KEY = "sk-cause-test-0123456789"

# --- the cause in the report, its sentence and its saved form ---------------------------------


def test_a_failed_report_names_the_cause_and_the_providers_message_with_the_key_masked(
    monkeypatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    error = status_error(openai.AuthenticationError, 401)
    error.message = f"Error code: 401 - Incorrect API key provided: {KEY}"
    error.args = (error.message,)
    report = failed_report(QUESTION, RESPONSE, 3, "diverse", instructor_wrapped(error))
    assert report.cause is Cause.AUTH
    assert report.error == "AuthenticationError: Error code: 401 - Incorrect API key provided: ***"
    assert report.reason.startswith("Not scored (auth): the judge refused the API key: ")
    assert KEY not in report.reason and KEY not in json.dumps(report.to_dict())
    saved = json.loads(json.dumps(report.to_dict()))
    assert saved["cause"] == "auth"
    assert RelevancyReport.from_dict(saved).cause is Cause.AUTH
    measured = RelevancyReport(QUESTION, RESPONSE, 0.8, 3, "diverse", False)
    assert measured.cause is None and measured.to_dict()["cause"] is None


def test_a_judge_that_answered_with_no_usable_probe_keeps_that_cause() -> None:
    report = RelevancyReport(QUESTION, RESPONSE, math.nan, 3, "diverse", False, judge_calls=3)
    assert report.cause is Cause.NO_USABLE_PROBE
    assert RelevancyReport.from_dict(report.to_dict()).cause is Cause.NO_USABLE_PROBE


def failed(cause: Cause) -> RelevancyReport:
    """A row that ended NaN with ``cause``."""
    return RelevancyReport(
        QUESTION, RESPONSE, math.nan, 3, "diverse", False, error="E: x", cause=cause
    )


@pytest.mark.parametrize(
    ("cause", "stops"),
    [
        (Cause.AUTH, True),
        (Cause.UNKNOWN_MODEL, True),
        (Cause.UNREACHABLE, True),
        (Cause.RATE_LIMITED, False),
        (Cause.TIMEOUT, False),
        (Cause.BAD_REPLY, False),
    ],
)
def test_only_a_cause_no_retry_mends_stops_a_run(cause: Cause, stops: bool) -> None:
    stop = EarlyStop(rows=2)
    assert [stop.note(failed(cause)), stop.note(failed(cause))] == [False, stops]


def test_early_stop_counts_only_the_same_permanent_cause_one_row_after_another() -> None:
    scored = RelevancyReport(QUESTION, RESPONSE, 0.9, 3, "diverse", False)
    stop = EarlyStop(rows=3)
    outcomes = [
        stop.note(r)
        for r in (
            failed(Cause.AUTH),
            failed(Cause.AUTH),
            scored,  # a row that scored: the judge works after all
            failed(Cause.RATE_LIMITED),  # a retry may mend it: never stops a run
            failed(Cause.RATE_LIMITED),
            failed(Cause.RATE_LIMITED),
            failed(Cause.AUTH),
            failed(Cause.UNREACHABLE),  # another cause starts the count again
            failed(Cause.UNREACHABLE),
            failed(Cause.UNREACHABLE),
        )
    ]
    assert outcomes == [False] * 9 + [True]
    assert stop.why().startswith("3 rows failed with unreachable (the judge could not be reached")


# --- against the loopback server: what reached it, and what the report says ------------------


def judge_at(server: LoopbackServer) -> Any:
    client = AsyncOpenAI(base_url=server.openai_base_url, api_key="test")
    return llm_factory("gpt-4o-mini", provider="openai", client=client)


def score_one(server: LoopbackServer) -> RelevancyReport:
    metric = AnswerRelevancy(llm=judge_at(server), embeddings=HashEmbeddings(), strictness=3)
    rows = [{"user_input": QUESTION, "response": RESPONSE}]
    return asyncio.run(metric.abatch_score(rows))[0].report


@pytest.mark.slow
def test_a_refused_key_is_auth_and_every_request_that_reached_the_server_is_counted() -> None:
    with LoopbackServer(faults=[Fault("unauthorized", fraction=1.0, endpoint="chat")]) as server:
        report = score_one(server)
        seen = server.count("chat")
    assert report.cause is Cause.AUTH
    assert report.reason.startswith("Not scored (auth): the judge refused the API key: ")
    assert "AuthenticationError: Error code: 401" in report.reason
    assert report.notes == []  # not swallowed as a reply that did not parse
    assert report.usage is not None and report.usage.judge_requests == seen


@pytest.mark.slow
def test_a_refused_key_of_the_embeddings_is_auth_said_of_the_embeddings() -> None:
    with LoopbackServer(faults=[Fault("unauthorized", fraction=1.0, endpoint="embeddings")]) as s:
        client = AsyncOpenAI(base_url=s.openai_base_url, api_key="test")
        embeddings = OpenAIEmbeddings(client=client, model="text-embedding-3-small")
        metric = AnswerRelevancy(llm=judge_at(s), embeddings=embeddings, strictness=3)
        rows = [{"user_input": QUESTION, "response": RESPONSE}]
        report = asyncio.run(metric.abatch_score(rows))[0].report
    assert report.cause is Cause.AUTH
    assert report.reason.startswith("Not scored (auth): the embeddings refused the API key: ")
    assert RelevancyReport.from_dict(report.to_dict()).reason == report.reason


@pytest.mark.slow
def test_a_judge_reply_that_is_no_json_is_bad_reply_and_not_asked_again() -> None:
    with LoopbackServer(faults=[Fault("malformed", fraction=1.0, endpoint="chat")]) as server:
        report = score_one(server)
        seen = server.count("chat")
    assert report.cause is Cause.BAD_REPLY
    assert report.usage is not None and report.usage.judge_requests == seen
    assert seen <= 4  # instructor's own attempts (1 + 3 retries), once


# --- the command line ----------------------------------------------------------------------


@pytest.mark.slow
def test_score_against_a_refused_key_stops_early_with_its_own_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    data = tmp_path / "rows.jsonl"
    shutil.copy(EXAMPLE, data)
    with LoopbackServer(faults=[Fault("unauthorized", fraction=1.0, endpoint="chat")]) as server:
        result = CliRunner().invoke(
            app, ["score", str(data), *server.cli_options(), "--no-table", "--no-progress"]
        )
        seen = server.count("chat")
    assert sum(1 for _ in EXAMPLE.open()) == 36
    assert result.exit_code == 4, result.output
    assert seen <= 10
    assert "NaN: 3 (auth 3)" in result.stdout
    assert f"judge {seen} request(s)" in result.stdout  # what reached the server
    err = result.stderr
    assert "not scored (auth): 3 row(s); row 1: Not scored (auth): the judge refused" in err
    assert "Error code: 401" in err  # the provider's message, without the table
    assert "stopped early: 3 rows failed with auth (the judge refused the API key: " in err
    assert "fix it and run it again" in err
    assert KEY not in result.output


@pytest.mark.slow
def test_the_command_as_its_own_process_against_a_refused_key_prints_each_failure_once() -> None:
    env = {**os.environ, "OPENAI_API_KEY": KEY, "PYTHONPATH": str(Path(__file__).parent.parent)}
    with LoopbackServer(faults=[Fault("unauthorized", fraction=1.0)]) as server:
        command = ["score", str(EXAMPLE), *server.cli_options(), "--no-table"]
        done = subprocess.run(
            [sys.executable, "-m", "ragas_relevancy_ext", *command],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        seen = server.count("chat")
    assert done.returncode == 4, done.stderr
    assert seen <= 10 and "NaN: 3 (auth 3)" in done.stdout
    rows = [line for line in done.stderr.splitlines() if re.match(r"row \d+ not scored", line)]
    assert len(rows) == len(set(rows)) == 3  # each failed row once...
    assert done.stderr.count("Error code: 401") == 3 + 2  # ...then the cause's and the stop's line
    assert "API call failed" not in done.stderr  # instructor >= 1.4 logs every failed attempt


@pytest.mark.slow
def test_a_saved_report_keeps_the_cause_for_show_and_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    data, out, page = tmp_path / "rows.jsonl", tmp_path / "out.jsonl", tmp_path / "page.html"
    data.write_text("".join(EXAMPLE.read_text().splitlines(keepends=True)[:2]))
    with LoopbackServer(faults=[Fault("unauthorized", fraction=1.0, endpoint="chat")]) as server:
        result = CliRunner().invoke(
            app, ["score", str(data), *server.cli_options(), "--out", str(out), "--no-progress"]
        )
    assert result.exit_code == 1, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["cause"] for line in lines] == ["auth", "auth"]
    shown = CliRunner().invoke(app, ["show", str(out), "--no-table", "--html", str(page)])
    assert "NaN: 2 (auth 2)" in shown.stdout
    assert "not scored (auth): 2 row(s)" in shown.stderr and "Error code: 401" in shown.stderr
    assert "not scored (auth)" in page.read_text()


@pytest.mark.slow
def test_compare_against_a_refused_key_names_the_cause_per_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(EXAMPLE.read_text().splitlines(keepends=True)[:2]))
    with LoopbackServer(faults=[Fault("unauthorized", fraction=1.0, endpoint="chat")]) as server:
        result = CliRunner().invoke(app, ["compare", str(data), *server.cli_options()])
    assert result.exit_code == 1
    assert "RuntimeError" not in result.output and "recorded 0 replies" not in result.output
    assert "(stock: auth: AuthenticationError: Error" in result.stdout
    assert "the judge failed on 2" in result.stdout


# --- the pytest plugin ---------------------------------------------------------------------


@pytest.mark.slow
def test_the_plugin_says_the_cause_and_the_message_and_junit_carries_the_cause(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    pytester.makepyfile(
        test_bot=f"""
        from ragas_relevancy_ext.pytest_plugin import assert_relevant

        def test_answer():
            assert_relevant({QUESTION!r}, {RESPONSE!r})
        """
    )
    with LoopbackServer(faults=[Fault("unauthorized", fraction=1.0, endpoint="chat")]) as server:
        result = pytester.runpytest(
            "--relevancy-judge",
            "openai:gpt-4o-mini",
            "--relevancy-base-url",
            server.openai_base_url,
            "--relevancy-embeddings",
            "hash",
            "--junitxml=junit.xml",
        )
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    head = "answer relevancy NOT MEASURED (auth): the judge refused the API key: "
    assert head + "AuthenticationError: Error code: 401" in out
    assert KEY not in out
    tree = ET.parse(pytester.path / "junit.xml")
    properties = {p.get("name"): p.get("value") for p in tree.iter("property")}
    assert properties["relevancy_cause"] == "auth"
    error = properties["relevancy_error"]
    assert error.startswith("the judge refused the API key: AuthenticationError: Error code: 401")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["langchain", "ragas"])
def test_a_refused_key_is_auth_for_langchain_and_ragas_wrapper_judges(kind: str) -> None:
    from langchain_openai import ChatOpenAI
    from ragas.llms import LangchainLLMWrapper

    with LoopbackServer(faults=[Fault("unauthorized", fraction=1.0, endpoint="chat")]) as server:
        chat = ChatOpenAI(
            model="gpt-4o-mini", base_url=server.openai_base_url, api_key="test", max_retries=0
        )
        judge = chat if kind == "langchain" else LangchainLLMWrapper(chat)
        options = ProbeOptions.resolve(3, "stock", legacy=True)  # as ResponseRelevancy asks
        meter = UsageMeter()
        with pytest.raises(Exception) as failure:
            asyncio.run(
                score_sample(
                    QUESTION, RESPONSE, llm=judge, embeddings=None, options=options, meter=meter
                )
            )
        report = failed_report(QUESTION, RESPONSE, 3, "stock", failure.value, meter.usage)
        seen = server.count("chat")
    assert report.cause is Cause.AUTH
    assert report.reason.startswith("Not scored (auth): the judge refused the API key: ")
    assert report.usage is not None and report.usage.judge_requests == seen
