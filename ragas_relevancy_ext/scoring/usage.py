"""What a score cost: judge and embedding requests and tokens, as the provider reported them
(nothing is counted with a local tokenizer). A cached reply is no request; a failed request
counts 0 tokens. :func:`metering` makes a per-sample :class:`UsageMeter` current."""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, TypeVar

NOT_REPORTED = "not reported"
T = TypeVar("T")


@contextlib.contextmanager
def context_value(variable: ContextVar[T | None], value: T) -> Iterator[T]:
    """``variable`` set to ``value`` inside the block, as it was after."""
    token = variable.set(value)
    try:
        yield value
    finally:
        variable.reset(token)


def _values(data: Any) -> tuple[Any, ...]:
    """A dataclass's field values in order (``dataclasses.astuple`` deep-copies each: slow)."""
    return tuple(getattr(data, name) for name in data.__dataclass_fields__)


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _sum(values: Iterable[int | None]) -> int | None:
    """The sum of ``values``; None (not reported) when any is None."""
    start: int | None = 0
    return functools.reduce(_add, values, start)


@dataclass(frozen=True)
class Usage:
    """Requests and tokens of the judge and the embeddings; a token field None: not reported.
    ``cached`` counts judge replies read from a cache."""

    judge_requests: int = 0
    judge_prompt_tokens: int | None = 0
    judge_completion_tokens: int | None = 0
    embedding_requests: int = 0
    embedding_tokens: int | None = 0
    cached: int = 0

    def add(self, other: Usage) -> Usage:
        """Field-by-field sum; a token field not reported on either side stays not reported."""
        return Usage(
            self.judge_requests + other.judge_requests,
            _add(self.judge_prompt_tokens, other.judge_prompt_tokens),
            _add(self.judge_completion_tokens, other.judge_completion_tokens),
            self.embedding_requests + other.embedding_requests,
            _add(self.embedding_tokens, other.embedding_tokens),
            self.cached + other.cached,
        )

    __add__ = add

    @classmethod
    def total(cls, items: Iterable[Usage | None]) -> Usage | None:
        """The sum of ``items``; None when any is None (a report that carries no usage)."""
        total = cls()
        for item in items:
            if item is None:
                return None
            total = total.add(item)
        return total

    @property
    def judge_tokens(self) -> int | None:
        """Prompt plus completion tokens of the judge (None when either is not reported)."""
        return _add(self.judge_prompt_tokens, self.judge_completion_tokens)

    def to_dict(self) -> dict[str, int | None]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Usage | None:
        """Rebuild from :meth:`to_dict`; None for None (a report written before usage)."""
        if data is None:
            return None
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def cost(
        self,
        price_in: float | None,
        price_out: float | None,
        price_embeddings: float | None = None,
    ) -> float | None:
        """USD for prices per million tokens (judge prompt, judge completion, embeddings);
        None when a needed price or token count is missing."""
        parts = [(self.judge_prompt_tokens, price_in), (self.judge_completion_tokens, price_out)]
        if self.embedding_requests:
            parts.append((self.embedding_tokens, price_embeddings))
        known = [
            (tokens, price) for tokens, price in parts if tokens is not None and price is not None
        ]
        if len(known) < len(parts):
            return None
        return sum(tokens * price / 1_000_000 for tokens, price in known)


@dataclass(frozen=True)
class Prices:
    """USD per million tokens, given by the user: judge prompt (in), completion (out), embeddings;
    no built-in table (prices change)."""

    judge_in: float | None = None
    judge_out: float | None = None
    embeddings: float | None = None

    def __str__(self) -> str:
        judge_in, judge_out, embeddings = ("?" if v is None else f"{v:g}" for v in _values(self))
        return f"${judge_in} in, ${judge_out} out, ${embeddings} embeddings per million tokens"


class UsageMeter:
    """The usage of one sample (or one shared request), added to as its calls return."""

    def __init__(self) -> None:
        self.usage = Usage()
        self._lock = threading.Lock()  # a sync client's call records from a worker thread

    def add(self, usage: Usage) -> None:
        with self._lock:
            self.usage = self.usage.add(usage)


_METER: ContextVar[UsageMeter | None] = ContextVar("ragas_relevancy_usage", default=None)


def metering(meter: UsageMeter | None = None) -> contextlib.AbstractContextManager[UsageMeter]:
    """Make ``meter`` (a new one when None) the current meter inside the block."""
    return context_value(_METER, UsageMeter() if meter is None else meter)


def current_meter() -> UsageMeter | None:
    """The meter that :func:`record` adds to here (None outside :func:`metering`)."""
    return _METER.get()


def record(usage: Usage) -> None:
    """Add ``usage`` to the current meter (nothing happens outside :func:`metering`)."""
    meter = _METER.get()
    if meter is not None:
        meter.add(usage)


def tokens_from(source: Any, *names: str) -> int | None:
    """The first of ``names`` that ``source`` (an object or a mapping) holds as an int."""
    for name in names:
        value = source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def judge_request_usage(usage: Any) -> Usage:
    """One judge request's usage from an SDK ``usage`` object or mapping (None: not reported)."""
    return Usage(
        judge_requests=1,
        judge_prompt_tokens=tokens_from(usage, "prompt_tokens", "input_tokens"),
        judge_completion_tokens=tokens_from(usage, "completion_tokens", "output_tokens"),
    )


def judge_usage_of_reply(reply: Any) -> Usage:
    """One instructor request: the usage of the completion instructor keeps (summed over
    its retries) as ``reply._raw_response``."""
    raw = getattr(reply, "_raw_response", None)
    return judge_request_usage(getattr(raw, "usage", None))


def judge_usage_from_result(result: Any) -> Usage:
    """One LangChain or RAGAS-wrapper request, from its ``LLMResult``'s token usage."""
    output = getattr(result, "llm_output", None)
    token_usage = output.get("token_usage") if isinstance(output, Mapping) else None
    if isinstance(token_usage, Mapping) and tokens_from(token_usage, "prompt_tokens") is not None:
        return judge_request_usage(token_usage)
    metas = [
        getattr(getattr(g, "message", None), "usage_metadata", None)
        for gs in getattr(result, "generations", None) or []
        for g in gs
    ]
    if metas and all(isinstance(m, Mapping) for m in metas):
        prompt, completion = (
            _sum(tokens_from(m, name) for m in metas) for name in ("input_tokens", "output_tokens")
        )
        return Usage(1, prompt, completion)
    return judge_request_usage(None)


def apportion(amount: int, weights: Sequence[int]) -> list[int]:
    """``amount`` split in proportion to ``weights`` as whole numbers that sum to ``amount``
    (largest remainders, ties to the earlier weight; all-zero weights split evenly)."""
    if not amount:
        return [0] * len(weights)
    if not any(weights):
        weights = [1] * len(weights)
    whole = sum(weights)
    shares = [amount * w // whole for w in weights]
    short = amount - sum(shares)
    if short:  # a stable sort on the negated remainders: ties keep the earlier weight first
        behind = [-(amount * w % whole) for w in weights]
        for i in sorted(range(len(weights)), key=behind.__getitem__)[:short]:
            shares[i] += 1
    return shares


def split_usage(usage: Usage, weights: Sequence[int]) -> list[Usage]:
    """``usage`` of one shared request split over its callers by ``weights``, so the parts add
    up to exactly ``usage``; a field not reported stays so."""
    columns = [
        [None] * len(weights) if v is None else apportion(v, weights) for v in _values(usage)
    ]
    return [Usage(*parts) for parts in zip(*columns, strict=True)]


def format_usage(usage: Usage | None, per: int = 1) -> str:
    """One line of requests and tokens; with ``per`` > 1, each figure divided by it."""
    if usage is None:
        return f"usage {NOT_REPORTED}"

    def amount(value: int) -> str:
        return f"{value:,}" if per == 1 else f"{value / per:,.2f}"

    def tokens(*parts: tuple[int | None, str]) -> str:
        known = [(value, name) for value, name in parts if value is not None]
        if len(known) < len(parts):
            return f"tokens {NOT_REPORTED}"
        return " + ".join(f"{amount(v)} {name}".rstrip() for v, name in known) + " tokens"

    judge = tokens(
        (usage.judge_prompt_tokens, "prompt"), (usage.judge_completion_tokens, "completion")
    )
    return (
        f"judge {amount(usage.judge_requests)} request(s), {judge} | embeddings "
        f"{amount(usage.embedding_requests)} request(s), {tokens((usage.embedding_tokens, ''))} | "
        f"cached {amount(usage.cached)}"
    )


# -- the HTTP exchanges of one call, as the provider answered them ---------------------------


@dataclass
class Exchange:
    """One answer an OpenAI SDK client received during a watched call, and the JSON sent."""

    path: str
    status: int
    sent: Any = None
    answer: Any = None


@dataclass
class Watch:
    """What one judge or embeddings call exchanged (see :func:`watching`): embeddings answers
    always, the others and what was sent with ``bodies``; ``elsewhere`` tells whether a span not
    the call's own is current."""

    bodies: bool = False
    elsewhere: Callable[[], bool] | None = None
    exchanges: list[Exchange] = field(default_factory=list)
    traced_elsewhere: bool = False
    result: Any = None  # what the call returned (a reply, vectors), for its span


_WATCH: ContextVar[Watch | None] = ContextVar("ragas_relevancy_watch", default=None)


def watching(watch: Watch) -> contextlib.AbstractContextManager[Watch]:
    """Inside the block, the hooks of :func:`hook_clients` note each answer in ``watch``."""
    return context_value(_WATCH, watch)


def _reads(watch: Watch | None, response: Any) -> bool:
    if watch is None or not response.is_success:
        return False
    return watch.bodies or response.request.url.path.endswith("/embeddings")


def note_answer(response: Any) -> None:
    """The httpx response hook (sync clients): note ``response`` in the watched call, if any."""
    watch = _WATCH.get()
    if watch is None:
        return
    exchange = Exchange(response.request.url.path, response.status_code)
    if _reads(watch, response):
        exchange.answer = _json(response.read())
    if watch.bodies:
        exchange.sent = _json(response.request.content)
    if watch.elsewhere is not None and watch.elsewhere():
        watch.traced_elsewhere = True
    watch.exchanges.append(exchange)


async def note_answer_async(response: Any) -> None:
    """:func:`note_answer` for async clients (the body read without blocking)."""
    if _reads(_WATCH.get(), response):
        await response.aread()
    note_answer(response)


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def openai_clients(obj: Any, depth: int = 0) -> list[Any]:
    """The OpenAI SDK clients a judge or embeddings object (or a wrapper) sends through."""
    openai = sys.modules.get("openai")
    if openai is None or depth > 3 or obj is None or isinstance(obj, (str, bool)):
        return []
    if isinstance(obj, (openai.OpenAI, openai.AsyncOpenAI)):
        return [obj]
    found: list[Any] = []
    for name in ("client", "async_client", "root_client", "root_async_client", "_client"):
        found += [c for c in openai_clients(getattr(obj, name, None), depth + 1) if c not in found]
    for name in ("langchain_llm", "embeddings"):  # RAGAS's and the package's wrappers
        found += [c for c in openai_clients(getattr(obj, name, None), depth + 1) if c not in found]
    return found


def hook_clients(obj: Any) -> list[Any]:
    """Give the OpenAI SDK clients of ``obj`` (the user's own too) the answer hooks, once."""
    clients = openai_clients(obj)
    for client in clients:
        http: Any = getattr(client, "_client", None)
        hooks = getattr(http, "event_hooks", None)
        if not isinstance(hooks, dict):
            continue
        is_async = inspect.iscoroutinefunction(getattr(http, "send", None))
        wanted = (note_answer_async, anote_limits) if is_async else (note_answer, note_limits)
        have = list(hooks.get("response", ()))
        if any(hook not in have for hook in wanted):
            have += [hook for hook in wanted if hook not in have]
            http.event_hooks = {**hooks, "response": have}
    return clients


class Listener(Protocol):
    """What hears the provider's answers to the request under way (a key's limit)."""

    def observe(self, status: int, headers: Mapping[str, str]) -> Any: ...


_LISTENER: ContextVar[Listener | None] = ContextVar("ragas_relevancy_listener", default=None)


def listening(listener: Listener) -> contextlib.AbstractContextManager[Listener]:
    """Inside the block, each HTTP answer goes to ``listener.observe(status, headers)``, and a
    429 is left to the caller (``x-should-retry: false``), which asks again after the pause."""
    return context_value(_LISTENER, listener)


def note_limits(response: Any) -> None:
    """The httpx response hook of the clients the package builds (see :func:`listening`)."""
    listener = _LISTENER.get()
    if listener is None:
        return
    if response.status_code == 429:
        response.headers["x-should-retry"] = "false"
    listener.observe(response.status_code, response.headers)


async def anote_limits(response: Any) -> None:
    """:func:`note_limits` for an async client."""
    note_limits(response)


CHARS_PER_TOKEN = 4  # a request's tokens estimated before it is sent


def estimate_tokens(texts: str | Sequence[str]) -> int:
    """A request's tokens before it is sent: its characters / 4 (at least 1)."""
    chars = len(texts) if isinstance(texts, str) else sum(len(t) for t in texts)
    return max(1, chars // CHARS_PER_TOKEN)
