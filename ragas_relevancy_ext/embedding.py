"""One async way to embed texts with any embeddings object, and the checks every vector passes.

Speaks to modern ``BaseRagasEmbedding`` (``aembed_texts``), legacy ``BaseRagasEmbeddings`` and
LangChain ``Embeddings`` (``aembed_documents``). Every result is checked before any arithmetic,
so a provider that collapses a list into one vector fails here with a sentence, not in numpy.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import EmbeddingShapeError


def embeddings_kind(embeddings: Any) -> str:
    """``"modern"`` or ``"documents"`` (legacy RAGAS and LangChain); TypeError otherwise."""
    from ragas.embeddings.base import BaseRagasEmbedding

    if isinstance(embeddings, BaseRagasEmbedding):
        return "modern"
    if callable(getattr(embeddings, "aembed_documents", None)):
        return "documents"
    raise TypeError(
        "embeddings must be a ragas BaseRagasEmbedding, a legacy BaseRagasEmbeddings or a "
        f"LangChain Embeddings, got {type(embeddings).__name__}"
    )


async def embed_texts(
    embeddings: Any, texts: Sequence[str], limiter: asyncio.Semaphore | None = None
) -> np.ndarray:
    """Embed ``texts`` in one call of ``embeddings`` and return a checked (len(texts), d) array."""
    kind = embeddings_kind(embeddings)
    async with limiter if limiter is not None else contextlib.nullcontext():
        if kind == "modern" and getattr(embeddings, "is_async", True) is False:
            # a provider built on a sync client (e.g. OpenAIEmbeddings(client=OpenAI()))
            vectors = await asyncio.to_thread(embeddings.embed_texts, list(texts))
        elif kind == "modern":
            vectors = await embeddings.aembed_texts(list(texts))
        else:
            vectors = await embeddings.aembed_documents(list(texts))
    return check_vectors(vectors, len(texts), type(embeddings).__name__)


async def embed_question_and_probes(
    embeddings: Any,
    question: str,
    probes: Sequence[str],
    limiter: asyncio.Semaphore | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The question's vector and the probes' (len(probes), d) array, from two concurrent calls.

    Two calls, as stock makes them, so a provider answering one call with vectors of a wrong
    size shows up as a length mismatch instead of a quietly wrong cosine.
    """
    question_vectors, probe_vectors = await asyncio.gather(
        embed_texts(embeddings, [question], limiter), embed_texts(embeddings, probes, limiter)
    )
    if question_vectors.shape[1] != probe_vectors.shape[1]:
        raise EmbeddingShapeError(
            f"{type(embeddings).__name__} returned a vector of length "
            f"{question_vectors.shape[1]} for the question but vectors of length "
            f"{probe_vectors.shape[1]} for the {len(probes)} probe(s)"
        )
    return question_vectors[0], probe_vectors


def check_vectors(vectors: Any, n_texts: int, source: str) -> np.ndarray:
    """One finite, non-zero vector per text, all one length, else :class:`EmbeddingShapeError`."""
    try:
        rows = [list(map(float, v)) for v in vectors]
    except (TypeError, ValueError) as exc:
        raise EmbeddingShapeError(
            f"{source} returned {type(vectors).__name__} for {n_texts} text(s), not a list of "
            f"numeric vectors ({exc})"
        ) from exc
    lengths = [len(r) for r in rows]
    if len(rows) != n_texts:
        raise EmbeddingShapeError(
            f"{source} returned {len(rows)} vector(s) of length(s) {_lengths(lengths)} for "
            f"{n_texts} text(s); expected one vector per text. If the provider answers a list "
            "with one vector, wrap it in ragas_relevancy_ext.OneTextPerCall."
        )
    if len(set(lengths)) > 1:
        raise EmbeddingShapeError(
            f"{source} returned {n_texts} vectors of different lengths {_lengths(lengths)} "
            f"for {n_texts} text(s)"
        )
    if lengths and lengths[0] == 0:
        raise EmbeddingShapeError(f"{source} returned empty vectors for {n_texts} text(s)")
    for index, row in enumerate(rows):
        if not all(math.isfinite(x) for x in row):
            raise EmbeddingShapeError(
                f"{source} returned a vector with NaN or infinite values for text {index} "
                f"of {n_texts}"
            )
        if not any(row):
            raise EmbeddingShapeError(
                f"{source} returned an all-zero vector for text {index} of {n_texts}; "
                "its cosine is undefined"
            )
    return np.asarray(rows, dtype=float)


def _lengths(lengths: list[int]) -> str:
    return str(sorted(set(lengths))) if len(lengths) > 4 else str(lengths)
