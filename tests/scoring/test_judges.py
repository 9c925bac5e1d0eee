"""Asking a judge of any kind: replies read from text, repairs counted, usage recorded."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.outputs import Generation, LLMResult
from ragas.llms.base import BaseRagasLLM, InstructorBaseRagasLLM, LangchainLLMWrapper

from ragas_relevancy_ext.errors import JudgeReplyError
from ragas_relevancy_ext.scoring.judges import (
    RAGAS_REPAIRS,
    JudgeWrapper,
    ask_judge,
    parse_reply,
)
from ragas_relevancy_ext.scoring.prompts import AnswerRelevanceOutput
from ragas_relevancy_ext.scoring.usage import Usage, metering

REPLY = '{"question": "Where is A17?", "noncommittal": 0}'
LONG_GARBAGE = "no object here, only words " * 10
TOKENS = {"prompt_tokens": 11, "completion_tokens": 4}


def test_a_reply_with_text_after_its_object_is_read():
    reply = parse_reply(f"Here it is: {REPLY}. Anything else?", AnswerRelevanceOutput)
    assert (reply.question, reply.noncommittal) == ("Where is A17?", 0)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (LONG_GARBAGE, "judge reply holds no JSON object: "),
        ("{" + LONG_GARBAGE + "}", "judge reply is not valid JSON (Expecting property name"),
    ],
)
def test_a_reply_that_does_not_parse_is_quoted_to_its_first_120_characters(text, says):
    with pytest.raises(JudgeReplyError) as caught:
        parse_reply(text, AnswerRelevanceOutput)
    assert str(caught.value).startswith(says)
    assert str(caught.value).endswith(repr(text[:120]))


class Repairs(BaseCallbackHandler):
    """Notes the names of the chains RAGAS starts (its repair prompt is one)."""

    def __init__(self) -> None:
        self.chains: list[str] = []

    def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self.chains.append(str(kwargs.get("name")))


class NotedRagasJudge(LangchainLLMWrapper):
    """A RAGAS judge over LangChain's fake chat model that notes each request's arguments."""

    def __init__(self, replies: list[str]):
        super().__init__(FakeListChatModel(responses=replies))
        self.asked: list[dict[str, Any]] = []

    async def generate(self, prompt: Any, n: int = 1, **kwargs: Any) -> LLMResult:
        self.asked.append({"n": n, **kwargs})
        return await super().generate(prompt, n=n, **kwargs)


@pytest.fixture(params=["untraced", "traced"])
def traced(request):
    """Each test once without tracing and once with a tracer provider of its own."""
    from opentelemetry.sdk.trace import TracerProvider

    from ragas_relevancy_ext.scoring import tracing

    provider = TracerProvider() if request.param == "traced" else None
    previous = tracing.use_provider(provider)
    yield
    tracing.use_provider(previous)


@pytest.mark.usefixtures("traced")
def test_a_ragas_reply_that_never_parses_says_how_many_repairs_were_asked():
    judge = NotedRagasJudge([LONG_GARBAGE] * (1 + RAGAS_REPAIRS))
    told: list[int] = []
    handler = Repairs()
    with metering() as meter, pytest.raises(JudgeReplyError) as caught:
        asyncio.run(
            ask_judge(judge, "prompt", AnswerRelevanceOutput, [handler], repairs=told.append)
        )
    assert told == [RAGAS_REPAIRS]
    assert str(caught.value) == (
        f"judge reply did not parse, nor after {RAGAS_REPAIRS} RAGAS repair request(s): "
        f"{LONG_GARBAGE[:120]!r}"
    )
    assert len(judge.asked) == 1 + RAGAS_REPAIRS
    assert meter.usage.judge_requests == 1 + RAGAS_REPAIRS
    # each repair request carries the caller's callbacks, and RAGAS's own arguments
    repairs = judge.asked[1:]
    assert all(asked.get("callbacks") is not None for asked in repairs)
    assert len(handler.chains) >= RAGAS_REPAIRS


class Failing(BaseRagasLLM):
    """A RAGAS judge whose every request fails."""

    async def generate(self, *args: Any, **kwargs: Any) -> LLMResult:
        raise ConnectionError("judge unreachable")

    def generate_text(self, *args: Any, **kwargs: Any) -> LLMResult:
        raise ConnectionError("judge unreachable")

    async def agenerate_text(self, *args: Any, **kwargs: Any) -> LLMResult:
        raise ConnectionError("judge unreachable")

    def is_finished(self, response: LLMResult) -> bool:
        return True


def test_a_ragas_request_is_counted_with_its_tokens_and_a_failed_one_as_a_request():
    class Counted(Failing):
        async def generate(self, *args: Any, **kwargs: Any) -> LLMResult:
            return LLMResult(
                generations=[[Generation(text=REPLY)]],
                llm_output={"token_usage": {"prompt_tokens": 7, "completion_tokens": 3}},
            )

    with metering() as meter:
        asyncio.run(ask_judge(Counted(), "prompt", AnswerRelevanceOutput))
    assert meter.usage == Usage(judge_requests=1, judge_prompt_tokens=7, judge_completion_tokens=3)

    with metering() as meter, pytest.raises(ConnectionError):
        asyncio.run(ask_judge(Failing(), "prompt", AnswerRelevanceOutput))
    assert meter.usage.judge_requests == 1


class SyncInstructorJudge(InstructorBaseRagasLLM):
    """An instructor judge on a synchronous client: only ``generate`` answers."""

    is_async = False

    def __init__(self, error: Exception | None = None):
        self.error = error

    def generate(self, prompt: str, response_model: Any) -> Any:
        if self.error is not None:
            raise self.error
        reply = response_model.model_validate_json(REPLY)
        # instructor keeps the completion, whose usage is summed over its retries
        object.__setattr__(reply, "_raw_response", SimpleNamespace(usage=TOKENS))
        return reply

    async def agenerate(self, prompt: str, response_model: Any) -> Any:
        raise AssertionError("a synchronous client is asked in a worker thread")


def test_an_instructor_judge_on_a_synchronous_client_is_asked_through_generate():
    with metering() as meter:
        reply = asyncio.run(ask_judge(SyncInstructorJudge(), "prompt", AnswerRelevanceOutput))
    assert reply.question == "Where is A17?"
    assert meter.usage == Usage(judge_requests=1, judge_prompt_tokens=11, judge_completion_tokens=4)


def test_a_wrapper_on_a_synchronous_client_is_asked_through_generate():
    class SyncWrapper(JudgeWrapper):
        is_async = False

        def generate(self, prompt: str, response_model: Any) -> Any:
            return response_model.model_validate_json(REPLY)

        async def agenerate(self, prompt: str, response_model: Any) -> Any:
            raise AssertionError("a synchronous client is asked in a worker thread")

    wrapper = SyncWrapper(SyncInstructorJudge())
    reply = asyncio.run(ask_judge(wrapper, "prompt", AnswerRelevanceOutput))
    assert reply.question == "Where is A17?"


def test_a_failed_instructor_call_counts_the_attempts_its_error_carries():
    error = RuntimeError("gave up")
    error.n_attempts = 3  # as instructor's InstructorRetryException says
    with metering() as meter, pytest.raises(RuntimeError):
        asyncio.run(ask_judge(SyncInstructorJudge(error), "prompt", AnswerRelevanceOutput))
    assert meter.usage == Usage(judge_requests=3)  # no tokens reported

    error.total_usage = SimpleNamespace(**TOKENS)  # and the usage of all its attempts
    with metering() as meter, pytest.raises(RuntimeError):
        asyncio.run(ask_judge(SyncInstructorJudge(error), "prompt", AnswerRelevanceOutput))
    assert meter.usage == Usage(judge_requests=3, judge_prompt_tokens=11, judge_completion_tokens=4)

    with metering() as meter, pytest.raises(ConnectionError):  # a bare SDK error: one attempt
        asyncio.run(ask_judge(SyncInstructorJudge(ConnectionError()), "p", AnswerRelevanceOutput))
    assert meter.usage.judge_requests == 1
