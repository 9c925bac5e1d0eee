"""The one place that knows embeddings kinds: how to embed with each, and the vector checks.

Speaks to modern ``BaseRagasEmbedding`` (``aembed_texts``/``aembed_text``, or their sync twins in
a thread when the client is synchronous), and to legacy ``BaseRagasEmbeddings`` and LangChain
``Embeddings`` (``aembed_documents``/``aembed_query``). Every result is checked before any
arithmetic, so a provider that collapses a list into one vector fails here with a sentence, not
in numpy.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import math
import struct
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from itertools import starmap
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import numpy as np

from ..errors import EmbeddingShapeError
from . import aio, tracing
from .usage import (
    Exchange,
    Usage,
    anote_limits,
    hook_clients,
    note_answer,
    note_answer_async,
    note_limits,
    record,
    tokens_from,
)

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings as LangChainEmbeddings
    from ragas.embeddings.base import BaseRagasEmbedding

__all__ = [
    "Embeddings",
    "EmbeddingsKind",
    "check_options",
    "check_same_width",
    "check_vectors",
    "embed_one",
    "embed_question_and_probes",
    "embed_texts",
    "embeddings_kind",
    "metered",
    "metered_call",
    "sends_one_request",
    "usage_http_client",
]

# Every embeddings object the metrics accept (legacy BaseRagasEmbeddings is a LangChain Embeddings).
Embeddings: TypeAlias = "BaseRagasEmbedding | LangChainEmbeddings"
EmbeddingsKind = Literal["modern", "langchain"]


def embeddings_kind(embeddings: Any) -> EmbeddingsKind:
    """``"modern"`` or ``"langchain"`` (legacy RAGAS and LangChain); TypeError otherwise."""
    if isinstance(embeddings, _modern_base()):
        return "modern"
    if all(callable(getattr(embeddings, m, None)) for m in ("aembed_documents", "aembed_query")):
        return "langchain"
    raise TypeError(
        "embeddings must be a ragas BaseRagasEmbedding, a legacy BaseRagasEmbeddings or a "
        f"LangChain Embeddings, got {type(embeddings).__name__}"
    )


@functools.cache
def _modern_base() -> type:
    """RAGAS's ``BaseRagasEmbedding``, imported on first use (RAGAS loads slowly)."""
    from ragas.embeddings.base import BaseRagasEmbedding

    return BaseRagasEmbedding


def check_options(embeddings: Any, kwargs: dict[str, Any]) -> None:
    """Options reach modern embeddings only; LangChain's ``aembed_query`` takes none."""
    if kwargs and embeddings_kind(embeddings) != "modern":
        raise TypeError(
            f"{type(embeddings).__name__}.aembed_query takes no options, got {sorted(kwargs)}"
        )


async def embed_one(embeddings: Any, text: str, **kwargs: Any) -> Any:
    """One text in one call, unchecked: ``aembed_text`` (modern) or ``aembed_query``."""
    check_options(embeddings, kwargs)
    if embeddings_kind(embeddings) == "modern":
        return await metered(
            embeddings, aio.run_method(embeddings, "aembed_text", "embed_text", text, **kwargs)
        )
    return await metered(embeddings, embeddings.aembed_query(text))


# -- usage: what the provider reported for each request -------------------------------------


def usage_http_client(is_async: bool = True) -> Any:
    """The OpenAI SDK's default HTTP client, with the httpx response hooks that note each
    answer of a watched call (:func:`.usage.note_answer`: the ``usage`` of embeddings answers)
    and tell the key's limit of the request under way the provider's rate-limit headers and
    429s (:func:`.usage.listening`). The package builds its OpenAI clients on it; a client
    built without it is given the first hook on first use, and teaches no limits."""
    import openai

    if is_async:
        hooks = {"response": [note_answer_async, anote_limits]}
        return openai.DefaultAsyncHttpxClient(event_hooks=hooks)
    return openai.DefaultHttpxClient(event_hooks={"response": [note_answer, note_limits]})


async def metered(embeddings: Any, call: Any) -> Any:
    """Await one embeddings call of ``embeddings`` and record its requests and tokens.

    Tokens are the ``usage`` of each answer an OpenAI SDK client received (the user's own
    client too: :func:`.usage.hook_clients`); any other client (Gemini's embedContent, a local
    model) reports none, so its tokens are None. Requests: the answers seen (a LangChain
    client may split a long list), else 1. A call that failed counts one request and 0 tokens.
    With a tracer configured the call is an ``embeddings MODEL`` span.
    """
    if hook_clients(embeddings) and _OPENAI_EMBEDDINGS not in sys.modules:
        # the SDK imports it on first use: half a second, not on the event loop
        await asyncio.to_thread(importlib.import_module, _OPENAI_EMBEDDINGS)
    with tracing.client_call("embeddings", embeddings) as watch:
        try:
            watch.result = await call
        except Exception:
            answered = sum(map(_embeddings_answer, watch.exchanges))
            record(Usage(embedding_requests=max(1, answered)))
            raise
        answers = [e.answer for e in watch.exchanges if _embeddings_answer(e)]
        counts = [
            tokens_from(a.get("usage") or {}, "prompt_tokens", "total_tokens")
            if isinstance(a, dict)
            else None
            for a in answers
        ]
        tokens = sum(counts) if counts and None not in counts else None  # type: ignore[arg-type]
        record(Usage(embedding_requests=max(1, len(answers)), embedding_tokens=tokens))
    return watch.result


def _embeddings_answer(exchange: Exchange) -> bool:
    return exchange.path.endswith("/embeddings") and 200 <= exchange.status < 300


_OPENAI_EMBEDDINGS = "openai.resources.embeddings"


async def metered_call(embeddings: Any, call: Any) -> Any:
    """:func:`metered` for embeddings that send one request per call; others record their own."""
    if sends_one_request(embeddings):
        return await metered(embeddings, call)
    return await call


def sends_one_request(embeddings: Any) -> bool:
    """Whether one call of ``embeddings`` is one request (not so for :class:`OneTextPerCall`)."""
    return not getattr(embeddings, "one_request_per_text", False)


async def embed_texts(
    embeddings: Any, texts: Sequence[str], limiter: AbstractAsyncContextManager[Any] | None = None
) -> np.ndarray:
    """Embed ``texts`` in one call of ``embeddings`` and return a checked (len(texts), d) array.

    The call holds one of ``limiter``'s slots (a run's :class:`.Row`; a run's scheduler: its rate
    limits only) and, answered 429, is asked again after the run's pause; embeddings that send
    a request per text (:class:`OneTextPerCall`) are handed ``limiter`` and take a slot per text.
    """
    kind = embeddings_kind(embeddings)
    if not sends_one_request(embeddings):
        vectors = await embeddings.aembed_each(list(texts), limiter)
        return check_vectors(vectors, len(texts), type(embeddings).__name__)

    def make() -> Any:
        if kind == "modern":
            call = aio.run_method(embeddings, "aembed_texts", "embed_texts", list(texts))
        else:
            call = embeddings.aembed_documents(list(texts))
        return metered(embeddings, call)

    vectors = await aio.send(limiter, "embeddings", texts, make)
    return check_vectors(vectors, len(texts), type(embeddings).__name__)


async def embed_question_and_probes(
    embeddings: Any,
    question: str,
    probes: Sequence[str],
    limiter: AbstractAsyncContextManager[Any] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The question's vector and the probes' (len(probes), d) array, from two concurrent calls.

    Two calls, as stock makes them, so a provider answering one call with vectors of a wrong
    size shows up as a length mismatch instead of a quietly wrong cosine.
    """
    question_vectors, probe_vectors = await asyncio.gather(
        embed_texts(embeddings, [question], limiter), embed_texts(embeddings, probes, limiter)
    )
    check_same_width(type(embeddings).__name__, question_vectors, probe_vectors)
    return question_vectors[0], probe_vectors


def check_same_width(source: str, question_vectors: np.ndarray, probe_vectors: np.ndarray) -> None:
    """EmbeddingShapeError when the question's vector and the probes' differ in length."""
    if question_vectors.shape[1] != probe_vectors.shape[1]:
        raise EmbeddingShapeError(
            f"{source} returned a vector of length "
            f"{question_vectors.shape[1]} for the question but vectors of length "
            f"{probe_vectors.shape[1]} for the {len(probe_vectors)} probe(s)"
        )


def check_vectors(vectors: Any, n_texts: int, source: str) -> np.ndarray:
    """One finite, non-zero vector per text, all one length, else :class:`EmbeddingShapeError`.

    One conversion and whole-array checks; only a reply numpy cannot read as a (texts, width)
    array of numbers takes the element-wise path, which words the error.
    """
    array = _packed(vectors)
    if array is None:
        try:
            array = np.asarray(vectors, dtype=float)
        except (TypeError, ValueError):
            array = None
    if array is None or array.ndim != 2:
        return _check_slowly(vectors, n_texts, source)
    rows, width = array.shape
    if rows != n_texts:
        raise EmbeddingShapeError(_count_message(source, rows, [width] * rows, n_texts))
    if rows and width == 0:
        raise EmbeddingShapeError(f"{source} returned empty vectors for {n_texts} text(s)")
    bad = ~np.isfinite(array).all(axis=1) | ~array.any(axis=1)
    if bad.any():
        index = int(np.argmax(bad))
        _raise_bad_row(source, array[index].tolist(), index, n_texts)
    return array


def _packed(vectors: Any) -> np.ndarray | None:
    """A list of equally long lists of numbers (what SDKs return) as a (rows, width) array,
    each row packed by ``struct`` and the rows joined into the array's memory: two to three
    times faster than ``np.asarray`` at real widths, with the same values (each number read as
    ``float()`` reads it). None for any other reply, or a number ``struct`` does not take:
    ``np.asarray`` reads it.
    """
    if type(vectors) is not list or not vectors or type(vectors[0]) is not list:
        return None
    width = len(vectors[0])
    if not width or any(type(row) is not list or len(row) != width for row in vectors):
        return None
    try:  # starmap hands each row to pack as its arguments with one copy of the row
        data = bytearray().join(starmap(_row_packer(width), vectors))
    except (struct.error, TypeError, ValueError, OverflowError):
        return None
    return np.frombuffer(data).reshape(len(vectors), width)


@functools.lru_cache(maxsize=16)
def _row_packer(width: int) -> Callable[..., bytes]:
    """``pack`` of ``width`` native doubles (the layout of a float64 array's row)."""
    return struct.Struct(f"{width}d").pack


def _check_slowly(vectors: Any, n_texts: int, source: str) -> np.ndarray:
    """Element by element: for replies numpy cannot read as one array (ragged, not numbers)."""
    try:
        rows = [list(map(float, v)) for v in vectors]
    except (TypeError, ValueError) as exc:
        raise EmbeddingShapeError(
            f"{source} returned {type(vectors).__name__} for {n_texts} text(s), not a list of "
            f"numeric vectors ({exc})"
        ) from exc
    lengths = [len(r) for r in rows]
    if len(rows) != n_texts:
        raise EmbeddingShapeError(_count_message(source, len(rows), lengths, n_texts))
    if len(set(lengths)) > 1:
        raise EmbeddingShapeError(
            f"{source} returned {n_texts} vectors of different lengths {_lengths(lengths)} "
            f"for {n_texts} text(s)"
        )
    if lengths and lengths[0] == 0:
        raise EmbeddingShapeError(f"{source} returned empty vectors for {n_texts} text(s)")
    for index, row in enumerate(rows):
        _raise_bad_row(source, row, index, n_texts)
    return np.asarray(rows, dtype=float)


def _count_message(source: str, rows: int, lengths: list[int], n_texts: int) -> str:
    return (
        f"{source} returned {rows} vector(s) of length(s) {_lengths(lengths)} for "
        f"{n_texts} text(s); expected one vector per text. If the provider answers a list "
        "with one vector, wrap it in ragas_relevancy_ext.OneTextPerCall."
    )


def _raise_bad_row(source: str, row: list[float], index: int, n_texts: int) -> None:
    """EmbeddingShapeError when ``row`` holds NaN or infinity, or is all zero."""
    if not all(math.isfinite(x) for x in row):
        raise EmbeddingShapeError(
            f"{source} returned a vector with NaN or infinite values for text {index} of {n_texts}"
        )
    if not any(row):
        raise EmbeddingShapeError(
            f"{source} returned an all-zero vector for text {index} of {n_texts}; "
            "its cosine is undefined"
        )


def _lengths(lengths: list[int]) -> str:
    return str(sorted(set(lengths))) if len(lengths) > 4 else str(lengths)
