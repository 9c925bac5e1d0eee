"""Why a sample is NaN: the cause read from the whole error chain, on every path it leaves by.

The SDK paths run against ``LoopbackServer`` through the real openai SDK and the instructor of
the venv running the tests (1.3.2 retries every error itself; 1.4 and later wrap the SDK's
error in ``InstructorRetryException``): the cause, the requests counted and the early stop must
come out the same on both.
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

import httpx
import openai
import pytest
import tenacity
from google.genai import errors as genai_errors
from openai import AsyncOpenAI
from pydantic import BaseModel, ValidationError
from ragas.embeddings import OpenAIEmbeddings
from ragas.llms import llm_factory
from typer.testing import CliRunner

from ragas_relevancy_ext import AnswerRelevancy
from ragas_relevancy_ext.cli import app
from ragas_relevancy_ext.errors import (
    Cause,
    EmbeddingCallError,
    EmbeddingShapeError,
    JudgeHTTPError,
    JudgeReplyError,
    answer_headers,
    cause_of,
    failure_text,
    is_reply_error,
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

try:  # where the instructor running the tests keeps it
    from instructor.core import InstructorRetryException
except ImportError:  # instructor before 1.4
    from instructor.retry import InstructorRetryException


# --- the cause of one error, read from its whole chain ----------------------------------------


def status_error(cls: type[openai.APIStatusError], status: int) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx.Response(status, request=request, json={"error": {"message": "nope"}})
    return cls(f"Error code: {status} - nope", response=response, body=None)


def raised(error: BaseException, wrapper: BaseException) -> BaseException:
    """``wrapper`` raised ``from error``, as instructor and our own wrappers raise."""
    try:
        try:
            raise error
        except BaseException as inner:
            raise wrapper from inner
    except BaseException as outer:
        return outer


def instructor_wrapped(error: BaseException) -> BaseException:
    """``error`` as instructor >= 1.4 gives it up: no completion, the SDK error as cause."""
    wrapper = InstructorRetryException(
        str(error), last_completion=None, messages=[], n_attempts=1, total_usage=0
    )
    return raised(error, wrapper)


def tenacity_wrapped(error: BaseException) -> BaseException:
    attempt = tenacity.Future(1)
    attempt.set_exception(error)
    return tenacity.RetryError(attempt)


def validation_error() -> ValidationError:
    class Reply(BaseModel):
        question: str

    try:
        Reply.model_validate({})
    except ValidationError as exc:
        return exc
    raise AssertionError("unreachable")


SDK_ERRORS = [
    (status_error(openai.AuthenticationError, 401), Cause.AUTH),
    (status_error(openai.PermissionDeniedError, 403), Cause.AUTH),
    (status_error(openai.RateLimitError, 429), Cause.RATE_LIMITED),
    (status_error(openai.InternalServerError, 500), Cause.SERVER_ERROR),
    (status_error(openai.APIStatusError, 503), Cause.SERVER_ERROR),
    (status_error(openai.NotFoundError, 404), Cause.UNKNOWN_MODEL),
    (openai.APITimeoutError(httpx.Request("POST", "http://127.0.0.1")), Cause.TIMEOUT),
    (openai.APIConnectionError(request=httpx.Request("POST", "http://x")), Cause.UNREACHABLE),
    (httpx.ConnectError("refused"), Cause.UNREACHABLE),
    (httpx.ReadTimeout("slow"), Cause.TIMEOUT),
    (ConnectionRefusedError(111, "refused"), Cause.UNREACHABLE),
    (asyncio.TimeoutError(), Cause.TIMEOUT),
    (genai_errors.ClientError(401, {"error": {"message": "API key not valid"}}), Cause.AUTH),
    (genai_errors.ClientError(429, {"error": {"message": "quota"}}), Cause.RATE_LIMITED),
    (genai_errors.ServerError(500, {"error": {"message": "oops"}}), Cause.SERVER_ERROR),
]


@pytest.mark.parametrize(("error", "cause"), SDK_ERRORS, ids=lambda v: getattr(v, "value", ""))
def test_an_sdk_error_has_its_cause_bare_and_inside_every_wrapper(error, cause) -> None:
    assert cause_of(error) is cause
    assert cause_of(instructor_wrapped(error)) is cause
    assert cause_of(tenacity_wrapped(error)) is cause
    assert cause_of(raised(error, JudgeHTTPError("the judge call failed"))) is cause
    assert cause_of(raised(error, EmbeddingCallError("text 2 failed", 2))) is cause
    assert cause_of(raised(error, ValueError("wrapped"))) is cause


def test_a_429s_headers_are_found_inside_every_wrapper() -> None:
    """The run's pause reads ``retry-after`` wherever instructor or tenacity left the 429."""
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx.Response(429, headers={"retry-after-ms": "250"}, request=request)
    error = openai.RateLimitError("Error code: 429", response=response, body=None)
    wrapped = [
        instructor_wrapped(error),
        tenacity_wrapped(error),
        tenacity_wrapped(instructor_wrapped(error)),
        raised(error, JudgeHTTPError("the judge call failed")),
    ]
    for each in [error, *wrapped]:
        assert answer_headers(each)["retry-after-ms"] == "250"
    assert answer_headers(ValueError("no answer")) == {}


def test_an_sdk_error_inside_instructors_retry_error_is_not_a_reply_to_ask_again() -> None:
    wrapped = instructor_wrapped(status_error(openai.AuthenticationError, 401))
    assert not is_reply_error(wrapped)
    parsed = InstructorRetryException(
        "bad", last_completion=object(), messages=[], n_attempts=3, total_usage=0
    )
    assert is_reply_error(raised(validation_error(), parsed))


def test_failures_that_are_not_the_transports_have_their_own_cause() -> None:
    assert cause_of(JudgeReplyError("no JSON")) is Cause.BAD_REPLY
    assert cause_of(validation_error()) is Cause.BAD_REPLY
    not_json = raised(json.JSONDecodeError("x", "doc", 0), JudgeHTTPError("not valid JSON"))
    assert cause_of(not_json) is Cause.BAD_REPLY
    assert cause_of(EmbeddingShapeError("3 vectors for 4 texts")) is Cause.EMBEDDINGS_ERROR
    shape = raised(KeyError("data"), EmbeddingCallError("text 0 failed", 0))
    assert cause_of(shape) is Cause.EMBEDDINGS_ERROR
    assert cause_of(ValueError("user_input cannot be empty")) is Cause.BAD_INPUT
    assert cause_of(TypeError("response must be a string, got int")) is Cause.BAD_INPUT
    assert cause_of(asyncio.CancelledError()) is Cause.CANCELLED
    assert cause_of(RuntimeError("surprise")) is Cause.OTHER


def test_an_account_out_of_quota_is_a_cause_of_its_own_and_a_rate_limit_is_not() -> None:
    from ragas_relevancy_ext.testing.limits import Admission
    from ragas_relevancy_ext.testing.loopback import _QUOTA

    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    body = _QUOTA["openai"]
    response = httpx.Response(429, request=request, json=body)
    out_of_credit = openai.RateLimitError("Error code: 429", response=response, body=body["error"])
    assert cause_of(out_of_credit) is Cause.QUOTA
    assert cause_of(instructor_wrapped(out_of_credit)) is Cause.QUOTA
    assert cause_of(genai_errors.ClientError(429, _QUOTA["gemini"])) is Cause.QUOTA
    per_minute = Admission(False, exceeded="requests", limit=15, wait=0.6)
    assert cause_of(genai_errors.ClientError(429, per_minute.gemini_error("m"))) is (
        Cause.RATE_LIMITED
    )
    assert cause_of(status_error(openai.RateLimitError, 429)) is Cause.RATE_LIMITED


def raised_while_handling(handled: BaseException, error: BaseException) -> BaseException:
    """``error`` raised inside the ``except`` that caught ``handled`` (no ``from``)."""
    try:
        try:
            raise handled
        except BaseException:
            raise error  # noqa: B904 - the implicit context is the point
    except BaseException as outer:
        return outer


def http_500() -> httpx.HTTPStatusError:
    request = httpx.Request("POST", "http://127.0.0.1/v1/embeddings")
    response = httpx.Response(500, request=request)
    return httpx.HTTPStatusError("Server error '500'", request=request, response=response)


def test_a_broken_answer_to_a_retry_made_while_handling_a_500_is_the_broken_answer() -> None:
    # older openai SDKs retry a 500 inside their except block: the retry's broken JSON carries
    # the handled 500 as its context, and the row failed for the JSON, not the 500
    not_json = raised_while_handling(http_500(), json.JSONDecodeError("Unterminated", "{", 1))
    assert cause_of(not_json) is Cause.BAD_REPLY
    assert failure_text(not_json).startswith("JSONDecodeError")
    invalid = raised_while_handling(http_500(), validation_error())
    assert cause_of(invalid) is Cause.BAD_REPLY
    shape = raised_while_handling(http_500(), EmbeddingShapeError("2 vectors for 1 text"))
    assert cause_of(shape) is Cause.EMBEDDINGS_ERROR


def test_a_plain_error_raised_while_handling_a_transport_error_keeps_its_cause() -> None:
    # a wrapper raised without ``from`` (or ``from None``, which hides the context only from
    # the printed traceback) still has the transport's cause
    gave_up = raised_while_handling(http_500(), RuntimeError("gave up"))
    assert cause_of(gave_up) is Cause.SERVER_ERROR
    gave_up.__suppress_context__ = True
    assert cause_of(gave_up) is Cause.SERVER_ERROR


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
    assert seen <= 4  # instructor's own attempts (3 before 1.4, 1 + 3 retries after), once


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
