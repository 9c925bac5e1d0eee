"""The embeddings module's edges that mutation testing found unchecked: each error names the
embeddings class and the text at fault, replies numpy cannot read as one array are judged as
strictly as those it can, and the usage hook counts the tokens of embeddings answers only."""

from __future__ import annotations

import asyncio
import importlib
import math
import sys
from typing import Any

import httpx
import openai
import pytest
from ragas.embeddings.base import BaseRagasEmbedding

from ragas_relevancy_ext import EmbeddingShapeError, OneTextPerCall
from ragas_relevancy_ext.scoring.embeddings import (
    check_vectors,
    embed_one,
    embed_question_and_probes,
    embed_texts,
    embeddings_kind,
    metered,
    usage_http_client,
)
from ragas_relevancy_ext.scoring.usage import anote_answer, metering
from ragas_relevancy_ext.testing.offline import HashEmbeddings, LangchainHashEmbeddings


class WidthByCount(BaseRagasEmbedding):
    """A modern embeddings whose vectors are as long as the list they answer (a faulty
    provider): the question's vector and the probes' differ in length."""

    def embed_text(self, text: str, **kwargs: Any) -> list[float]:
        return [1.0]

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        return self.embed_text(text)

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        return [[1.0] * len(texts) for _ in texts]


class Counting:
    """An async context manager that counts how often it is entered."""

    def __init__(self) -> None:
        self.entered = self.inside = 0

    async def __aenter__(self) -> None:
        self.entered += 1
        self.inside += 1

    async def __aexit__(self, *exc: object) -> None:
        self.inside -= 1


# -- options and messages naming the embeddings -------------------------------------------------


def test_options_for_a_langchain_embeddings_are_refused_naming_its_class() -> None:
    with pytest.raises(
        TypeError,
        match=r"^LangchainHashEmbeddings\.aembed_query takes no options, got \['a', 'b'\]$",
    ):
        asyncio.run(embed_one(LangchainHashEmbeddings(), "hi", b=1, a=2))


def test_modern_embeddings_take_options_through_embed_one() -> None:
    vector = asyncio.run(embed_one(HashEmbeddings(8), "hello there", anything=1))
    assert vector == HashEmbeddings(8).embed_text("hello there")


def test_a_width_mismatch_between_question_and_probes_names_the_embeddings() -> None:
    with pytest.raises(
        EmbeddingShapeError,
        match=r"^WidthByCount returned a vector of length 1 for the question but vectors of "
        r"length 2 for the 2 probe\(s\)$",
    ):
        asyncio.run(embed_question_and_probes(WidthByCount(), "q", ["a", "b"]))


# -- replies numpy cannot read as one array --------------------------------------------------


def test_a_reply_of_words_names_the_source_and_the_type_it_got() -> None:
    with pytest.raises(
        EmbeddingShapeError,
        match=r"^Words returned list for 1 text\(s\), not a list of numeric vectors \(",
    ):
        check_vectors([["one", "two"]], 1, "Words")


def test_a_ragged_count_error_names_the_source_and_how_to_fix_it() -> None:
    with pytest.raises(EmbeddingShapeError) as caught:
        check_vectors([[0.1, 0.2], [0.3], [0.4, 0.5]], 2, "Ragged")
    assert str(caught.value) == (
        "Ragged returned 3 vector(s) of length(s) [2, 1, 2] for 2 text(s); expected one vector "
        "per text. If the provider answers a list with one vector, wrap it in "
        "ragas_relevancy_ext.OneTextPerCall."
    )


def test_one_empty_vector_given_as_an_iterator_is_named_as_empty() -> None:
    with pytest.raises(EmbeddingShapeError, match=r"^Lazy returned empty vectors for 1 text\(s\)$"):
        check_vectors([iter([])], 1, "Lazy")


def test_a_bad_row_among_iterators_is_named_by_source_and_index() -> None:
    with pytest.raises(
        EmbeddingShapeError,
        match=r"^Lazy returned a vector with NaN or infinite values for text 1 of 2$",
    ):
        check_vectors([iter([1.0, 0.0]), iter([math.nan, 1.0])], 2, "Lazy")
    with pytest.raises(
        EmbeddingShapeError,
        match=r"^Lazy returned an all-zero vector for text 1 of 2; its cosine is undefined$",
    ):
        check_vectors([iter([1.0, 0.0]), iter([0.0, 0.0])], 2, "Lazy")


def test_an_all_zero_vector_is_named_with_why_it_is_refused() -> None:
    with pytest.raises(
        EmbeddingShapeError,
        match=r"^Zero returned an all-zero vector for text 0 of 1; its cosine is undefined$",
    ):
        check_vectors([[0.0, 0.0]], 1, "Zero")


def test_up_to_four_lengths_are_listed_and_more_are_summed_up() -> None:
    with pytest.raises(EmbeddingShapeError, match=r"different lengths \[2, 1, 2, 1\] for 4"):
        check_vectors([[1.0, 2.0], [1.0], [1.0, 2.0], [1.0]], 4, "Ragged")
    with pytest.raises(EmbeddingShapeError, match=r"different lengths \[1, 2\] for 5"):
        check_vectors([[1.0, 2.0], [1.0], [1.0, 2.0], [1.0], [1.0, 2.0]], 5, "Ragged")


# -- request slots -------------------------------------------------------------------------------


class Watched(HashEmbeddings):
    """HashEmbeddings that notes, for each request, how many of ``limiter``'s slots are held."""

    def __init__(self, limiter: Counting) -> None:
        super().__init__(8)
        self.limiter = limiter
        self.held: list[int] = []

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        self.held.append(self.limiter.inside)
        return [self.embed_text(text) for text in texts]

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        self.held.append(self.limiter.inside)
        return self.embed_text(text)


def test_a_one_request_call_holds_one_slot_while_its_request_is_sent() -> None:
    limiter = Counting()
    embeddings = Watched(limiter)
    vectors = asyncio.run(embed_texts(embeddings, ["a b", "c"], limiter))
    assert vectors.shape == (2, 8)
    assert (embeddings.held, limiter.entered, limiter.inside) == ([1], 1, 0)


def test_embeddings_sending_a_request_per_text_take_a_slot_per_text() -> None:
    limiter = Counting()
    embeddings = Watched(limiter)
    vectors = asyncio.run(embed_texts(OneTextPerCall(embeddings), ["a", "b", "c"], limiter))
    assert vectors.tolist() == [HashEmbeddings(8).embed_text(t) for t in "abc"]
    assert limiter.entered == 3
    assert len(embeddings.held) == 3 and all(held >= 1 for held in embeddings.held)
    assert limiter.inside == 0


def test_embed_texts_takes_a_slot_of_the_limiter_for_its_one_request() -> None:
    limiter = Counting()
    vectors = asyncio.run(embed_texts(HashEmbeddings(8), ["a b", "c"], limiter))
    assert vectors.shape == (2, 8)
    assert limiter.entered == 1


# -- the usage hook --------------------------------------------------------------------------------


def _answer(path: str, body: Any, status: int = 200) -> httpx.Response:
    request = httpx.Request("POST", f"https://api.example.com/v1{path}")
    if isinstance(body, bytes):
        return httpx.Response(status, content=body, request=request)
    return httpx.Response(status, json=body, request=request)


def _usage(tokens: int) -> dict[str, Any]:
    return {"data": [], "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def test_the_async_hook_counts_each_embeddings_answer_and_nothing_else() -> None:
    client = usage_http_client()
    assert isinstance(client, openai.DefaultAsyncHttpxClient)
    hook, reports = client.event_hooks["response"]
    assert reports is anote_answer

    async def call() -> list[list[float]]:
        await hook(_answer("/embeddings", _usage(5)))
        await hook(_answer("/chat/completions", _usage(100)))
        await hook(_answer("/embeddings", _usage(1000), status=500))
        await hook(_answer("/embeddings", _usage(7)))
        return [[1.0]]

    async def run() -> tuple[Any, Any]:
        with metering() as meter:
            vectors = await metered(object(), call())
        return vectors, meter.usage

    vectors, usage = asyncio.run(run())
    assert vectors == [[1.0]]
    assert (usage.embedding_requests, usage.embedding_tokens) == (2, 12)
    # outside a metered call the hook notes nothing and reads nothing
    response = _answer("/embeddings", _usage(3))
    asyncio.run(hook(response))
    assert isinstance(usage_http_client(is_async=False), openai.DefaultHttpxClient)


def test_the_sync_hook_counts_answers_and_an_unreadable_body_as_unknown_tokens() -> None:
    hook, _ = usage_http_client(is_async=False).event_hooks["response"]

    def call_with(*responses: httpx.Response) -> Any:
        async def call() -> None:
            for response in responses:
                hook(response)

        async def run() -> Any:
            with metering() as meter:
                await metered(object(), call())
            return meter.usage

        return asyncio.run(run())

    usage = call_with(_answer("/embeddings", _usage(4)), _answer("/embeddings", _usage(6)))
    assert (usage.embedding_requests, usage.embedding_tokens) == (2, 10)
    usage = call_with(_answer("/embeddings", _usage(4)), _answer("/embeddings", b"not json"))
    assert (usage.embedding_requests, usage.embedding_tokens) == (2, None)
    usage = call_with(_answer("/embeddings", [1, 2]))
    assert (usage.embedding_requests, usage.embedding_tokens) == (1, None)
    usage = call_with(_answer("/other", _usage(4)))
    assert (usage.embedding_requests, usage.embedding_tokens) == (1, None)


def test_a_failed_call_counts_the_answers_seen_and_no_tokens() -> None:
    hook, _ = usage_http_client(is_async=False).event_hooks["response"]

    async def call() -> None:
        hook(_answer("/embeddings", _usage(4)))
        hook(_answer("/embeddings", _usage(4)))
        raise RuntimeError("provider down")

    async def run() -> Any:
        with metering() as meter:
            with pytest.raises(RuntimeError, match="provider down"):
                await metered(object(), call())
        return meter.usage

    usage = asyncio.run(run())
    assert (usage.embedding_requests, usage.embedding_tokens) == (2, 0)


def test_prompt_tokens_are_counted_before_total_tokens() -> None:
    hook, _ = usage_http_client(is_async=False).event_hooks["response"]

    async def call() -> None:
        hook(_answer("/embeddings", {"usage": {"prompt_tokens": 3, "total_tokens": 9}}))
        hook(_answer("/embeddings", {"usage": {"total_tokens": 4}}))

    async def run() -> Any:
        with metering() as meter:
            await metered(object(), call())
        return meter.usage

    usage = asyncio.run(run())
    assert (usage.embedding_requests, usage.embedding_tokens) == (2, 7)


def test_embeddings_sending_a_request_per_text_record_each_request_once() -> None:
    async def run(embeddings: Any) -> int:
        with metering() as meter:
            await embed_texts(embeddings, ["a", "b", "c"])
        return meter.usage.embedding_requests

    assert asyncio.run(run(HashEmbeddings())) == 1
    assert asyncio.run(run(OneTextPerCall(HashEmbeddings()))) == 3


# -- the OpenAI SDK's embeddings module, imported off the loop before the first call ----------

_SDK_EMBEDDINGS = "openai.resources.embeddings"


class Local(BaseRagasEmbedding):
    """Modern embeddings answering locally, holding what an SDK-backed one holds: a client,
    an async client, or the embeddings it wraps; notes whether the OpenAI SDK's embeddings
    module was loaded when it was called."""

    def __init__(self, **held: Any):
        super().__init__()
        for name, value in held.items():
            setattr(self, name, value)
        self.loaded: list[bool] = []

    def embed_text(self, text: str, **kwargs: Any) -> list[float]:
        self.loaded.append(_SDK_EMBEDDINGS in sys.modules)
        return [1.0, 0.5]

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        return self.embed_text(text)


@pytest.fixture
def sdk_embeddings_not_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The OpenAI SDK loaded but its embeddings module not yet (put back afterwards)."""
    module = importlib.import_module(_SDK_EMBEDDINGS)
    monkeypatch.setattr(sys.modules["openai.resources"], "embeddings", module)
    monkeypatch.delitem(sys.modules, _SDK_EMBEDDINGS)


def _nested(depth: int, **held: Any) -> Local:
    embeddings = Local(**held)
    for _ in range(depth):
        embeddings = Local(embeddings=embeddings)
    return embeddings


@pytest.mark.usefixtures("sdk_embeddings_not_loaded")
@pytest.mark.parametrize(
    ("depth", "attribute", "client", "loaded"),
    [
        (0, "client", openai.OpenAI, True),
        (0, "async_client", openai.AsyncOpenAI, True),
        (0, "other", openai.AsyncOpenAI, False),
        (2, "client", openai.AsyncOpenAI, True),
        (3, "client", openai.AsyncOpenAI, False),
    ],
)
@pytest.mark.parametrize("call", ["embed_texts", "embed_one", "embed_question_and_probes"])
def test_the_sdk_embeddings_module_is_loaded_before_a_client_s_first_call(
    depth: int, attribute: str, client: type, loaded: bool, call: str
) -> None:
    embeddings = _nested(depth, **{attribute: client(api_key="unused", base_url="http://x")})
    if call == "embed_texts":
        asyncio.run(embed_texts(embeddings, ["a"]))
    elif call == "embed_one":
        asyncio.run(embed_one(embeddings, "a"))
    else:
        asyncio.run(embed_question_and_probes(embeddings, "q", ["a"]))
    assert embeddings.loaded and set(embeddings.loaded) == {loaded}


@pytest.mark.usefixtures("sdk_embeddings_not_loaded")
def test_langchain_embeddings_holding_a_client_get_the_module_loaded_too() -> None:
    class Held(LangchainHashEmbeddings):
        def __init__(self) -> None:
            super().__init__()
            self.client = openai.AsyncOpenAI(api_key="unused", base_url="http://x")
            self.loaded: list[bool] = []

        def embed_query(self, text: str) -> list[float]:
            self.loaded.append(_SDK_EMBEDDINGS in sys.modules)
            return super().embed_query(text)

    embeddings = Held()
    asyncio.run(embed_one(embeddings, "a"))
    assert embeddings.loaded == [True]


def test_embeddings_kinds_are_named_and_anything_else_is_refused_by_type() -> None:
    assert embeddings_kind(HashEmbeddings()) == "modern"
    assert embeddings_kind(LangchainHashEmbeddings()) == "langchain"
    with pytest.raises(TypeError) as caught:
        embeddings_kind(Counting())
    assert str(caught.value) == (
        "embeddings must be a ragas BaseRagasEmbedding, a legacy BaseRagasEmbeddings or a "
        "LangChain Embeddings, got Counting"
    )


class Chunks(httpx.AsyncByteStream, httpx.SyncByteStream):
    """A body that arrives in chunks, as a streamed reply does."""

    def __iter__(self) -> Any:
        yield b'{"usage": {"total_tokens": 5}}'

    async def __aiter__(self) -> Any:
        yield b'{"usage": {"total_tokens": 5}}'


def _streamed(path: str) -> httpx.Response:
    request = httpx.Request("POST", f"https://api.example.com/v1{path}")
    return httpx.Response(200, stream=Chunks(), request=request)


def test_the_hooks_leave_other_answers_and_answers_outside_a_call_unread() -> None:
    async_hook, _ = usage_http_client().event_hooks["response"]
    sync_hook, _ = usage_http_client(is_async=False).event_hooks["response"]
    outside = [_streamed("/embeddings"), _streamed("/chat/completions")]
    for response in outside:
        asyncio.run(async_hook(response))
        sync_hook(response)
    inside = [_streamed("/chat/completions"), _streamed("/chat/completions")]

    async def call() -> None:
        await async_hook(inside[0])
        sync_hook(inside[1])

    async def run() -> Any:
        with metering() as meter:
            await metered(object(), call())
        return meter.usage

    usage = asyncio.run(run())
    assert (usage.embedding_requests, usage.embedding_tokens) == (1, None)
    for response in outside + inside:
        with pytest.raises(httpx.ResponseNotRead):
            _ = response.content
