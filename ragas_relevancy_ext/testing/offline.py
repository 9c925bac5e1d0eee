"""Offline stand-ins for a judge and embeddings (instructor-shaped, RAGAS and LangChain models),
shared by tests, examples and the CLI; judges record their prompts and count calls in flight."""

from __future__ import annotations

import asyncio
import json
import math
import re
import zlib
from collections import Counter, deque
from collections.abc import Iterable, Mapping, MutableSequence, Sequence
from typing import Any, TypeVar

from langchain_core.embeddings import Embeddings
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import BaseModel, Field
from ragas.embeddings.base import BaseRagasEmbedding
from ragas.llms.base import InstructorBaseRagasLLM

from ..scoring.aio import run_sync
from ..scoring.prompts import ANGLES

__all__ = [
    "EVASIVE",
    "STOPWORDS",
    "HashEmbeddings",
    "LangchainHashEmbeddings",
    "LookupEmbeddings",
    "NgramEmbeddings",
    "PretendChatModel",
    "PretendJudge",
    "SamePromptJudge",
    "ScriptedChatModel",
    "ScriptedJudge",
    "ScriptedJudgeExhausted",
    "pretend_reply_text",
    "prompt_input",
    "sentences",
    "words",
]

Reply = TypeVar("Reply", bound=BaseModel)

EVASIVE = frozenset({"know", "sorry", "unsure", "cannot", "unable", "idea"})
STOPWORDS = frozenset(
    "a an the is are was were be been being to of in on at for by with from and or but if "
    "then than so as it its this that these those i you he she we they me my your our their "
    "do does did has have had can could would should will shall may might must not no yes "
    "what which who whom whose when where why how there here all any some about into over "
    "under up down out off again just also very too only own same such more most other".split()
)
_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def words(text: str) -> set[str]:
    """The words of ``text`` that matter: lower-cased, stop words removed."""
    return {w for w in _WORD.findall(text.lower()) if w not in STOPWORDS}


def sentences(text: str) -> list[str]:
    """Split ``text`` into sentences on ., ! and ?."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def prompt_input(prompt: str) -> dict[str, Any]:
    """The JSON input a RAGAS ``BasePrompt.to_string`` put at the end of ``prompt``."""
    start = prompt.rfind("\ninput: ")
    end = prompt.rfind("\nOutput: ")
    if start == -1 or end < start:
        raise ValueError("prompt has no 'input: ... Output:' section")
    return json.loads(prompt[start + len("\ninput: ") : end])


def count_tokens(text: str) -> int:
    """Token count as the loopback server bills it: characters / 4, rounded up."""
    return math.ceil(len(text) / 4)


class _RecordingJudge(InstructorBaseRagasLLM):
    """An instructor-shaped judge recording its prompts (the latest ``keep``; None: all) and
    counting calls; each reply waits ``latency`` plus ``token_latency`` per reply token."""

    is_async = True

    def __init__(self, latency: float = 0.0, token_latency: float = 0.0, keep: int | None = None):
        self.latency = latency
        self.token_latency = token_latency
        self.prompts: MutableSequence[str] = [] if keep is None else deque(maxlen=keep)
        self.calls = 0
        self.in_flight = 0
        self.peak = 0

    def _reply(self, prompt: str, response_model: type[Reply]) -> Reply:
        raise NotImplementedError

    def generate(self, prompt: str, response_model: type[Reply]) -> Reply:
        return run_sync(self.agenerate(prompt, response_model))

    async def agenerate(self, prompt: str, response_model: type[Reply]) -> Reply:
        self.prompts.append(prompt)
        self.calls += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            reply = self._reply(prompt, response_model)
            wait = self.latency
            if self.token_latency:
                wait += self.token_latency * count_tokens(reply.model_dump_json())
            await asyncio.sleep(wait)  # also yields, so concurrent calls overlap
            return reply
        finally:
            self.in_flight -= 1


def _first_question(answer: str) -> tuple[str, int]:
    """PretendJudge's reading of an answer: its first sentence as a question, and the flag."""
    first = sentences(answer)[0] if sentences(answer) else ""
    question = (first.rstrip(".!?") + "?") if first else ""
    return question, int(not words(answer) or bool(words(answer) & EVASIVE))


class PretendJudge(_RecordingJudge):
    """A deterministic judge: first sentence as the question, evasive words flag noncommittal;
    other wordings of it for more probes, and statements to translate returned unchanged."""

    _VARIANTS = (
        "{q}",
        "Can you tell me: {q}",
        "In short, {q}",
        "I would like to know: {q}",
        "Quick question: {q}",
        "Please confirm: {q}",
        "Could you explain: {q}",
        "Help me understand: {q}",
        "Tell me briefly: {q}",
        "My question is: {q}",
    )

    def _reply(self, prompt: str, response_model: type[Reply]) -> Reply:
        if "statements" in response_model.model_fields:  # RAGAS's adapt: keep them as they are
            return response_model.model_validate({"statements": _to_translate(prompt)})
        data = prompt_input(prompt)
        question, flag = _first_question(str(data.get("response", "")))
        taken = {q.lower() for q in data.get("avoid") or []}
        variants = [v.format(q=question) for v in self._VARIANTS]
        if "probes" in response_model.model_fields:
            fresh = [v for v in variants if v.lower() not in taken] or variants
            n = int(data.get("n", 1))
            items = [{"question": fresh[i % len(fresh)], "noncommittal": flag} for i in range(n)]
            return response_model.model_validate({"probes": items})
        start = len(data.get("previous_questions") or [])  # sequential: the next wording
        if data.get("angle") is not None:  # word it as the angle asks
            base = str(data["angle"]).split(" (wording ", 1)[0]
            start = ANGLES.index(base) if base in ANGLES else zlib.crc32(base.encode())
        options = [variants[(start + k) % len(variants)] for k in range(len(variants))]
        question = next((o for o in options if o.lower() not in taken), options[0])  # not avoided
        return response_model.model_validate({"question": question, "noncommittal": flag})


class SamePromptJudge(_RecordingJudge):
    """A judge at temperature 0: the same prompt always gets the same reply, and each new prompt
    about a response gets the next wording of its first sentence as a question."""

    def __init__(self, latency: float = 0.0, token_latency: float = 0.0):
        super().__init__(latency=latency, token_latency=token_latency)
        self._replies: dict[str, list[dict[str, Any]]] = {}
        self._wordings: dict[str, int] = {}

    def _reply(self, prompt: str, response_model: type[Reply]) -> Reply:
        if prompt not in self._replies:
            data = prompt_input(prompt)
            answer = str(data.get("response", ""))
            question, flag = _first_question(answer)
            items = []
            for _ in range(int(data.get("n", 1))):
                number = self._wordings.get(answer, 0)
                self._wordings[answer] = number + 1
                items.append({"question": _wording(question, number), "noncommittal": flag})
            self._replies[prompt] = items
        items = self._replies[prompt]
        if "probes" in response_model.model_fields:
            return response_model.model_validate({"probes": items})
        return response_model.model_validate(items[0])


def _wording(question: str, number: int) -> str:
    """The ``number``-th wording (from 0) of ``question``: PretendJudge's, then numbered."""
    variants = PretendJudge._VARIANTS
    text = variants[number % len(variants)].format(q=question)
    return text if number < len(variants) else f"{text} ({number // len(variants) + 1})"


def _to_translate(prompt: str) -> list[str]:
    """The statements a RAGAS translation prompt asks for (either prompt family's wording)."""
    marker = "Statements to translate:\n"  # collections BasePrompt.adapt
    if marker in prompt:
        return json.loads(prompt.split(marker, 1)[1])
    return prompt_input(prompt)["statements"]  # PydanticPrompt.adapt


class ScriptedJudgeExhausted(RuntimeError):
    """A ScriptedJudge was asked more often than it has replies."""


class ScriptedJudge(_RecordingJudge):
    """Returns the given replies in order: a ``(question, noncommittal)`` pair, a dict or model
    of the output, a list of pairs (list outputs), raw JSON text, or an exception to raise."""

    def __init__(self, replies: Iterable[Any], latency: float = 0.0):
        super().__init__(latency=latency)
        self.replies = list(replies)
        self._next = 0

    @property
    def remaining(self) -> int:
        """Replies not used yet."""
        return len(self.replies) - self._next

    def _reply(self, prompt: str, response_model: type[Reply]) -> Reply:
        if self._next >= len(self.replies):
            raise ScriptedJudgeExhausted(
                f"ScriptedJudge was asked {self.calls} time(s) but holds "
                f"{len(self.replies)} replies"
            )
        reply = self.replies[self._next]
        self._next += 1
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, str):
            return response_model.model_validate_json(reply)
        if "probes" in response_model.model_fields:
            items = reply if isinstance(reply, list) else [reply]
            return response_model.model_validate({"probes": [_as_dict(i) for i in items]})
        return response_model.model_validate(_as_dict(reply))


def _as_dict(reply: Any) -> Any:
    if isinstance(reply, BaseModel):
        return reply.model_dump()
    if isinstance(reply, (tuple, list)) and len(reply) == 2:
        return {"question": reply[0], "noncommittal": reply[1]}
    return reply


class HashEmbeddings(BaseRagasEmbedding):
    """One dimension per word that matters, picked by a stable hash, plus one always on; unit
    length, and the same text always gives the same vector."""

    def __init__(self, width: int = 32):
        super().__init__()
        if width < 2:
            raise ValueError(f"width must be at least 2, got {width}")
        self.width = width

    def _counts(self, text: str) -> dict[int, int]:
        """How much of each dimension (from 1) ``text`` has."""
        return dict.fromkeys((self._dimension(word) for word in words(text)), 1)

    def _dimension(self, feature: str) -> int:
        return zlib.crc32(feature.encode()) % (self.width - 1) + 1

    def embed_text(self, text: str, **kwargs: Any) -> list[float]:
        vector = [1.0] + [0.0] * (self.width - 1)
        for dimension, count in self._counts(text).items():
            vector[dimension] = float(count)
        size = sum(v * v for v in vector) ** 0.5
        return [v / size for v in vector]

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        return self.embed_text(text)


_NON_WORD = re.compile(r"[\W_]+")


class NgramEmbeddings(HashEmbeddings):
    """Character 2- and 3-grams of each word, any script, counted into hashed dimensions, so
    texts in any script differ and two languages share almost none (as real embeddings do)."""

    def __init__(self, width: int = 1024):
        super().__init__(width)

    def _counts(self, text: str) -> dict[int, int]:
        padded = (f" {word} " for word in _NON_WORD.split(text.casefold()) if word)
        grams = (p[i : i + n] for p in padded for n in (2, 3) for i in range(len(p) - n + 1))
        return Counter(self._dimension(gram) for gram in grams if gram.strip())


class LookupEmbeddings(BaseRagasEmbedding):
    """Fixed vectors for known texts (worked examples with hand-made vectors)."""

    def __init__(self, vectors: Mapping[str, Sequence[float]]):
        super().__init__()
        self.vectors = {text: list(map(float, v)) for text, v in vectors.items()}

    def embed_text(self, text: str, **kwargs: Any) -> list[float]:
        if text not in self.vectors:
            raise KeyError(f"LookupEmbeddings has no vector for {text!r}")
        return self.vectors[text]

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        return self.embed_text(text)


def pretend_reply_text(prompt: str) -> str:
    """PretendJudge's reply to a probe (or translation) prompt, as a chat model's JSON text."""
    from ragas.prompt.pydantic_prompt import Translated

    from ..scoring.prompts import AnswerRelevanceOutput, DiverseProbeOutput

    try:
        data = prompt_input(prompt)
    except ValueError:
        data = {}
    model: type[BaseModel] = DiverseProbeOutput if "n" in data else AnswerRelevanceOutput
    if "Statements to translate:\n" in prompt or "statements" in data:
        model = Translated
    return PretendJudge()._reply(prompt, model).model_dump_json()


class _TextChatModel(BaseChatModel):
    """A LangChain chat model answering each prompt with ``_reply_text``; ``prompts`` records
    them, ``peak`` is the most async calls in flight (each waits ``latency`` seconds)."""

    latency: float = 0.0
    prompts: list[str] = Field(default_factory=list)
    in_flight: int = 0
    peak: int = 0

    def _reply_text(self, prompt: str) -> str:
        raise NotImplementedError

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        prompt = "\n".join(str(message.content) for message in messages)
        self.prompts.append(prompt)
        reply = AIMessage(content=self._reply_text(prompt))
        return ChatResult(generations=[ChatGeneration(message=reply)])

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kw: Any) -> ChatResult:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            result = self._generate(messages)  # stop words and callbacks: none apply
            await asyncio.sleep(self.latency)
            return result
        finally:
            self.in_flight -= 1


class PretendChatModel(_TextChatModel):
    """A LangChain chat model answering probe prompts as PretendJudge does, in JSON text."""

    @property
    def _llm_type(self) -> str:
        return "pretend-chat"

    def _reply_text(self, prompt: str) -> str:
        return pretend_reply_text(prompt)


class ScriptedChatModel(_TextChatModel):
    """A LangChain chat model whose n-th reply about a response is ``replies[response][n]``
    (cycling): a pair, a list of pairs or raw text. An unknown response gets a reply that names
    it and does not parse (an exception would be retried by RAGAS for minutes)."""

    replies: dict[str, list[Any]]
    asked: dict[str, int] = Field(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "scripted-chat"

    def _reply_text(self, prompt: str) -> str:
        try:
            response = str(prompt_input(prompt).get("response", ""))
        except ValueError:  # not a probe prompt
            response = ""
        if response not in self.replies:
            return f"no scripted reply for the response {response[:80]!r}"
        script = self.replies[response]
        number = self.asked.get(response, 0)
        self.asked[response] = number + 1
        reply = script[number % len(script)]
        if isinstance(reply, str):
            return reply
        if isinstance(reply, list) and all(not isinstance(i, (str, int)) for i in reply):
            return json.dumps({"probes": [_as_dict(item) for item in reply]})
        return json.dumps(_as_dict(reply))


class LangchainHashEmbeddings(Embeddings):
    """A LangChain ``Embeddings`` giving HashEmbeddings' vectors (legacy-style embed calls)."""

    def __init__(self, width: int = 32):
        self.hashed = HashEmbeddings(width)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.hashed.embed_text(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.hashed.embed_text(text)
