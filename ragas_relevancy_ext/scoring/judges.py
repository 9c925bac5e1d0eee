"""The one place that knows judge kinds (instructor ``llm_factory``, RAGAS ``BaseRagasLLM``,
LangChain models), and one async way to ask any of them for a reply."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

from pydantic import BaseModel
from ragas.llms.base import BaseRagasLLM, InstructorBaseRagasLLM, InstructorLLM

from ..errors import JudgeReplyError
from . import aio, tracing
from .redaction import mask_third_party_logs
from .usage import (
    Usage,
    judge_request_usage,
    judge_usage_from_result,
    judge_usage_of_reply,
    record,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from langchain_core.callbacks import Callbacks
    from langchain_core.language_models import BaseLanguageModel
    from langchain_core.outputs import LLMResult
    from langchain_core.prompt_values import StringPromptValue

mask_third_party_logs()  # instructor logs each failed attempt with the provider's words

Reply = TypeVar("Reply", bound=BaseModel)
# Every judge the metrics accept: instructor (llm_factory), RAGAS wrappers, LangChain models.
Judge: TypeAlias = "InstructorBaseRagasLLM | BaseRagasLLM | BaseLanguageModel"
JudgeKind = Literal["instructor", "ragas", "langchain"]

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)
# What RAGAS's PydanticPrompt gives its parser: repair requests allowed for one reply.
RAGAS_REPAIRS = 3


def judge_kind(llm: object) -> JudgeKind:
    """``"instructor"``, ``"ragas"`` or ``"langchain"``; TypeError for anything else."""
    from langchain_core.language_models import BaseLanguageModel

    if isinstance(llm, InstructorBaseRagasLLM):
        return "instructor"
    if isinstance(llm, BaseRagasLLM):
        return "ragas"
    if isinstance(llm, BaseLanguageModel):
        return "langchain"
    raise TypeError(
        f"llm must be an instructor judge (llm_factory), a ragas BaseRagasLLM or a LangChain "
        f"language model, got {type(llm).__name__}"
    )


async def ask_judge(
    llm: Judge,
    prompt: str,
    output_model: type[Reply],
    callbacks: Callbacks = None,
    repairs: Callable[[int], None] | None = None,
) -> Reply:
    """Send ``prompt`` to ``llm`` and return its reply as ``output_model``, usage recorded
    (:class:`JudgeReplyError` when it does not parse); with ``repairs``, a RAGAS judge's reply is
    read as stock legacy reads it, and ``repairs`` told how many repair requests were sent."""
    if isinstance(llm, JudgeWrapper):
        return await aio.run_method(llm, "agenerate", "generate", prompt, output_model)
    if tracing.tracer() is None:
        return await _ask(llm, prompt, output_model, callbacks, repairs)
    with tracing.client_call("chat", llm, prompt) as watch:
        watch.result = await _ask(llm, prompt, output_model, callbacks, repairs)
    return watch.result


async def _ask(
    llm: Judge,
    prompt: str,
    output_model: type[Reply],
    callbacks: Callbacks,
    repairs: Callable[[int], None] | None,
) -> Reply:
    judge_kind(llm)  # TypeError for what is no judge
    if isinstance(llm, InstructorBaseRagasLLM):
        return await _ask_instructor(llm, prompt, output_model)

    from langchain_core.prompt_values import StringPromptValue

    value = StringPromptValue(text=prompt)
    if isinstance(llm, BaseRagasLLM):
        result = await _metered(llm.generate(value, n=1, callbacks=callbacks))
        if repairs is not None:
            text = result.generations[0][0].text
            return await _read_as_ragas(llm, value, text, output_model, callbacks, repairs)
    else:
        result = await _metered(llm.agenerate_prompt([value], callbacks=callbacks))
    return parse_reply(result.generations[0][0].text, output_model)


async def _ask_instructor(
    llm: InstructorBaseRagasLLM, prompt: str, output_model: type[Reply]
) -> Reply:
    """One instructor call, its usage recorded: on failure, the attempts and total usage its
    retry error carries (a bare SDK error went through one attempt)."""
    if isinstance(llm, InstructorLLM):
        output_model = instructor_model(output_model)
    try:
        reply = await aio.run_method(llm, "agenerate", "generate", prompt, output_model)
    except Exception as exc:
        attempts = getattr(exc, "n_attempts", None)  # instructor's InstructorRetryException
        if not isinstance(attempts, int) or attempts < 1:
            attempts = 1
        total = getattr(exc, "total_usage", None)
        usage = _FAILED if total is None else judge_request_usage(total)
        record(dataclasses.replace(usage, judge_requests=attempts))
        raise
    record(judge_usage_of_reply(reply))
    return reply


@functools.lru_cache(maxsize=64)
def instructor_model(output_model: type[Reply]) -> type[Reply]:
    """``output_model`` wrapped once as instructor wraps it before each call (``openai_schema``),
    saving about 1 ms of CPU per call; the request is the same."""
    try:
        from instructor.function_calls import OpenAISchema, openai_schema
    except ImportError:  # an instructor without them wraps the model itself
        return output_model
    if issubclass(output_model, OpenAISchema):
        return output_model
    return openai_schema(output_model)


_FAILED = Usage(judge_requests=1)


async def _metered(call: Awaitable[LLMResult]) -> LLMResult:
    """Await a LangChain or RAGAS judge call and record its usage."""
    try:
        result = await call
    except Exception:
        record(_FAILED)
        raise
    record(judge_usage_from_result(result))
    return result


async def _read_as_ragas(
    llm: BaseRagasLLM,
    value: StringPromptValue,
    text: str,
    output_model: type[Reply],
    callbacks: Callbacks,
    repairs: Callable[[int], None],
) -> Reply:
    from langchain_core.exceptions import OutputParserException
    from ragas.exceptions import RagasOutputParserException
    from ragas.prompt.pydantic_prompt import RagasOutputParser

    counting = _CountingLLM(llm)
    try:
        return await RagasOutputParser(pydantic_object=output_model).parse_output_string(
            output_string=text,
            prompt_value=value,
            llm=counting,
            callbacks=callbacks,
            retries_left=RAGAS_REPAIRS,
        )
    except (OutputParserException, RagasOutputParserException) as exc:
        raise JudgeReplyError(
            f"judge reply did not parse, nor after {counting.calls} RAGAS repair request(s): "
            f"{text[:120]!r}"
        ) from exc
    finally:
        repairs(counting.calls)


class _CountingLLM(BaseRagasLLM):
    """A RAGAS judge that counts the requests RAGAS's parser sends it (its repair requests)."""

    def __init__(self, inner: BaseRagasLLM):
        self.inner, self.calls = inner, 0

    async def generate(self, *args: Any, **kwargs: Any) -> LLMResult:
        self.calls += 1
        return await _metered(self.inner.generate(*args, **kwargs))

    def generate_text(self, *args: Any, **kwargs: Any) -> LLMResult:
        return self.inner.generate_text(*args, **kwargs)

    async def agenerate_text(self, *args: Any, **kwargs: Any) -> LLMResult:
        return await self.inner.agenerate_text(*args, **kwargs)

    def is_finished(self, response: LLMResult) -> bool:
        return self.inner.is_finished(response)


def parse_reply(text: str, output_model: type[Reply]) -> Reply:
    """Read a JSON reply (optionally fenced, optionally with text around it) as ``output_model``."""
    body = _FENCE.sub("", text.strip())
    start, end = body.find("{"), body.rfind("}")
    if start == -1 or end < start:
        raise JudgeReplyError(f"judge reply holds no JSON object: {text[:120]!r}")
    try:
        data = json.loads(body[start : end + 1])
    except json.JSONDecodeError as exc:
        raise JudgeReplyError(f"judge reply is not valid JSON ({exc.msg}): {text[:120]!r}") from exc
    return output_model.model_validate(data)


class JudgeWrapper(InstructorBaseRagasLLM):
    """An instructor-shaped judge in front of a judge of any kind; subclasses add to
    :meth:`agenerate` (recording, caching)."""

    is_async = True

    def __init__(self, inner: Judge):
        self.inner = inner

    async def agenerate(self, prompt: str, response_model: type[Reply]) -> Reply:
        return await ask_judge(self.inner, prompt, response_model)

    def generate(self, prompt: str, response_model: type[Reply]) -> Reply:
        return aio.run_sync(self.agenerate(prompt, response_model))
