"""Why a failure is what it is (``errors.py``): the cause of one error read from its whole chain,
bare and inside every retry wrapper, by class where the SDK is loaded and by HTTP status."""

from __future__ import annotations

import asyncio
import json
import socket
from types import SimpleNamespace

import httpx
import openai
import pytest
import tenacity
from google.genai import errors as genai_errors
from pydantic import BaseModel, ValidationError

from ragas_relevancy_ext.errors import (
    Cause,
    EmbeddingCallError,
    EmbeddingShapeError,
    JudgeHTTPError,
    JudgeReplyError,
    answer_headers,
    cause_of,
    cause_phrase,
    deciding_error,
    failure_text,
    from_embeddings,
    is_reply_error,
)

try:  # where the instructor running the tests keeps it
    from instructor.core import InstructorRetryException
except ImportError:  # releases older than instructor.core
    from instructor.retry import InstructorRetryException


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


# --- a reply to ask again, the error that decided, a failure of the embeddings -----------------


def retry_error(completion: object = None, attempts: list[object] | None = None) -> Exception:
    """instructor's retry error with ``completion`` as its last and ``attempts`` as its record."""
    error = InstructorRetryException(
        "bad", last_completion=completion, messages=[], n_attempts=1, total_usage=0
    )
    error.failed_attempts = attempts or []
    return error


def test_a_retry_error_is_a_reply_to_ask_again_when_any_attempt_got_a_completion() -> None:
    reply = object()
    later = [SimpleNamespace(completion=None), SimpleNamespace(completion=reply)]
    assert is_reply_error(raised(validation_error(), retry_error(attempts=later)))
    unrecorded = [object(), SimpleNamespace(completion=reply)]  # an attempt keeping none
    assert is_reply_error(raised(validation_error(), retry_error(attempts=unrecorded)))
    nothing = [SimpleNamespace(completion=None)]
    assert not is_reply_error(raised(validation_error(), retry_error(attempts=nothing)))


def test_a_retry_error_with_a_completion_and_a_transport_error_behind_it_is_no_reply() -> None:
    refused = status_error(openai.AuthenticationError, 401)
    assert not is_reply_error(raised(refused, retry_error(completion=object())))
    assert is_reply_error(raised(validation_error(), retry_error(completion=object())))


def test_an_instructor_error_of_another_shape_is_read_without_failing() -> None:
    class InstructorRetryException(Exception):  # another release's, holding no attempts
        pass

    class IncompleteOutputException(Exception):
        pass

    assert not is_reply_error(InstructorRetryException("bad"))
    assert is_reply_error(IncompleteOutputException("cut off"))
    assert not is_reply_error(RuntimeError("other"))


def test_the_deciding_error_is_the_sdk_s_inside_every_wrapper() -> None:
    error = status_error(openai.AuthenticationError, 401)
    for wrapped in (instructor_wrapped(error), tenacity_wrapped(error), raised(error, KeyError())):
        assert deciding_error(wrapped) is error
    plain = RuntimeError("no transport behind it")
    assert deciding_error(plain) is plain


def sdk_error_at(url: str) -> openai.InternalServerError:
    request = httpx.Request("POST", url)
    response = httpx.Response(500, request=request, json={"error": {"message": "nope"}})
    return openai.InternalServerError("Error code: 500", response=response, body=None)


@pytest.mark.parametrize(
    ("url", "embeddings"),
    [
        ("http://127.0.0.1/v1/embeddings", True),
        ("http://127.0.0.1/v1/embeddings/", True),
        ("https://g.example/v1beta/models/m:batchEmbedContents", True),
        ("https://g.example/v1beta/models/m:embedContent", True),
        ("http://127.0.0.1/v1/chat/completions", False),
        ("https://g.example/v1beta/models/m:generateContent", False),
    ],
)
def test_a_failure_is_of_the_embeddings_when_its_request_went_there(url, embeddings) -> None:
    error = sdk_error_at(url)
    assert from_embeddings(error) is embeddings
    assert from_embeddings(raised(error, JudgeHTTPError("wrapped"))) is embeddings


def test_a_failure_is_of_the_embeddings_when_an_embeddings_error_is_in_its_chain() -> None:
    assert from_embeddings(EmbeddingShapeError("3 vectors for 4 texts"))
    assert from_embeddings(raised(KeyError("data"), EmbeddingCallError("text 0 failed", 0)))
    assert from_embeddings(raised(EmbeddingCallError("text 0 failed", 0), RuntimeError("up")))
    assert not from_embeddings(RuntimeError("no request"))
    assert not from_embeddings(raised(ValueError("x"), TypeError("y")))


def test_a_reply_that_instructor_or_a_parser_gave_up_on_is_a_bad_reply() -> None:
    from langchain_core.exceptions import OutputParserException
    from ragas.exceptions import RagasOutputParserException

    class IncompleteOutputException(Exception):  # instructor's, for a reply cut off
        pass

    assert cause_of(retry_error(completion=object())) is Cause.BAD_REPLY
    assert cause_of(IncompleteOutputException("max tokens")) is Cause.BAD_REPLY
    assert cause_of(OutputParserException("not JSON")) is Cause.BAD_REPLY
    assert cause_of(RagasOutputParserException()) is Cause.BAD_REPLY
    assert cause_of(RuntimeError("not a reply")) is Cause.OTHER


# --- where in a chain the cause is read ----------------------------------------------------------


def test_a_transport_error_recorded_only_as_a_failed_attempt_gives_the_cause() -> None:
    refused = SimpleNamespace(exception=status_error(openai.AuthenticationError, 401))
    assert cause_of(retry_error(attempts=[SimpleNamespace(completion=None), refused])) is Cause.AUTH


def test_a_retry_error_whose_last_attempt_was_cancelled_is_read_without_failing() -> None:
    attempt = tenacity.Future(1)
    attempt.cancel()
    assert cause_of(tenacity.RetryError(attempt)) is Cause.OTHER


def test_the_errors_of_a_group_are_read_for_the_cause() -> None:
    class Group(Exception):  # as ExceptionGroup holds them
        def __init__(self, *errors: BaseException) -> None:
            super().__init__("several")
            self.exceptions = errors

    limited = Group(RuntimeError("other"), status_error(openai.RateLimitError, 429))
    assert cause_of(limited) is Cause.RATE_LIMITED


def test_a_chain_that_loops_back_on_itself_is_read_to_its_end() -> None:
    first, second = RuntimeError("first"), KeyError("second")
    first.__cause__, second.__cause__ = second, first
    assert cause_of(first) is Cause.OTHER
    assert not from_embeddings(first)


def test_a_name_that_does_not_resolve_is_unreachable() -> None:
    assert cause_of(socket.gaierror(-2, "Name or service not known")) is Cause.UNREACHABLE


class StatusError(Exception):
    """An SDK error that carries its HTTP status only as ``status_code``."""

    def __init__(self, status: int, **said: object) -> None:
        super().__init__(f"status {status}")
        self.status_code = status
        for name, value in said.items():
            setattr(self, name, value)


@pytest.mark.parametrize(
    ("status", "cause"),
    [(401, Cause.AUTH), (599, Cause.SERVER_ERROR), (600, Cause.OTHER), (99, Cause.OTHER)],
)
def test_a_status_is_read_from_status_code_and_only_when_it_is_an_http_one(status, cause) -> None:
    assert cause_of(StatusError(status)) is cause


@pytest.mark.parametrize("field", ["code", "type", "body", "details", "message"])
def test_a_429_says_its_quota_is_spent_in_any_field_the_providers_use(field: str) -> None:
    assert cause_of(StatusError(429, **{field: "insufficient_quota"})) is Cause.QUOTA
    assert cause_of(StatusError(429, **{field: "slow down"})) is Cause.RATE_LIMITED


def test_a_cause_is_said_of_the_judge_unless_the_embeddings_are_named() -> None:
    assert cause_phrase(Cause.AUTH) == "the judge refused the API key"
    assert cause_phrase("auth", embeddings=True) == "the embeddings refused the API key"
