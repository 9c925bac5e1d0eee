"""Limits shared by every row a metric scores in one event loop."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from .batching import RunEmbedder

__all__ = ["RunLimiter"]


class RunLimiter:
    """One semaphore and one :class:`RunEmbedder` per event loop, shared by every row a metric
    scores in that loop.

    ``ragas.evaluate`` runs a metric's rows concurrently in one loop; sharing the limiter bounds
    the calls in flight across rows (as stock's ``max_workers`` does), not per row, and sharing
    the embedder lets rows share embedding requests. A copy of the metric, or a pickled one,
    starts with its own.
    """

    def __init__(self) -> None:
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, ...]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, size: int) -> asyncio.Semaphore:
        """The running loop's semaphore of ``size`` (a new one when the size changed)."""
        loop = asyncio.get_running_loop()
        held = self._by_loop.get(loop)
        if held is None or held[0] != size:
            held = (size, asyncio.Semaphore(size), {})
            self._by_loop[loop] = held
        return held[1]

    def embedder(self, size: int, embeddings: Any, coalesce: bool) -> RunEmbedder:
        """The running loop's embedder for ``embeddings``, on the semaphore of ``size``."""
        limiter = self.get(size)
        embedders = self._by_loop[asyncio.get_running_loop()][2]
        key = (id(embeddings), coalesce)
        held = embedders.get(key)
        if held is None or held.embeddings is not embeddings:
            held = embedders[key] = RunEmbedder(embeddings, limiter, coalesce=coalesce)
        return held

    def __deepcopy__(self, memo: dict[int, Any]) -> RunLimiter:
        return RunLimiter()

    def __reduce__(self) -> tuple[type[RunLimiter], tuple[()]]:
        """A pickled metric carries no run's semaphores: it unpickles with an empty limiter."""
        return (RunLimiter, ())

    def __repr__(self) -> str:
        return "RunLimiter()"
