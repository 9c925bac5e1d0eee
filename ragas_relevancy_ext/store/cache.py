"""A judge that keeps its replies on disk (JSON text in SQLite, no pickle), so a re-run asks the
real judge nothing. A store that cannot be written costs the cache, never a score; replies are
written by one thread of their own, never on the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import os
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from pydantic import BaseModel

from ..scoring.judges import Judge, JudgeWrapper, Reply
from ..scoring.usage import Usage, record
from .sqlite import CacheError, SqliteStore

__all__ = ["CacheError", "CachedJudge", "ReplyStore", "SqliteStore", "disk_store", "reply_key"]

KEY_VERSION = 1


class ReplyStore(Protocol):
    """A key-value store of JSON text (``get`` gives None for a missing key)."""

    def get(self, key: str) -> Any: ...

    def set(self, key: str, value: Any) -> None: ...


disk_store = SqliteStore  # the store in a directory (created if missing)


def reply_key(model: str, prompt: str, output_model: type[BaseModel], occurrence: int) -> str:
    """The reply cache's key, the same on every run: ``model``, ``prompt``, the reply's model
    and which asking of that prompt it is (``occurrence``: stock mode asks one prompt N times)."""
    payload = json.dumps(
        [KEY_VERSION, model, output_model.__name__, prompt, occurrence], ensure_ascii=False
    )
    return "ragas-relevancy-ext:" + hashlib.sha256(payload.encode()).hexdigest()


_CACHED = Usage(cached=1)


@functools.cache
def _writer(pid: int) -> ThreadPoolExecutor:
    """One writer for every cache (SQLite takes one writer at a time), off the event loop; one
    per process, as a forked child has no writer thread of its parent's."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragas-relevancy-cache-writer")


class CachedJudge(JudgeWrapper):
    """Answers from ``store`` when it can, else asks ``inner`` and stores the reply.

    ``model`` names the judge in the key, so two judges never share replies; ``hits`` and
    ``misses`` count this run's lookups; ``off`` says why the cache was switched off, else None.
    """

    def __init__(self, inner: Judge, store: ReplyStore, model: str):
        super().__init__(inner)
        self.store = store
        self.model = model
        self.hits = 0
        self.misses = 0
        self.off: str | None = None
        self._asked: Counter[bytes] = Counter()  # digests: a long run holds no prompt texts

    def start_over(self) -> None:
        """Count each prompt's askings from the first again: a later sample that sends the same
        prompt gets the same reply (each pytest check, whichever worker makes it)."""
        self._asked.clear()

    async def agenerate(self, prompt: str, response_model: type[Reply]) -> Reply:
        # Counted before any await, so concurrent identical prompts get distinct occurrences.
        asked = hashlib.sha256(f"{response_model.__name__}\x00{prompt}".encode()).digest()
        occurrence = self._asked[asked]
        self._asked[asked] += 1
        key = reply_key(self.model, prompt, response_model, occurrence)
        stored = self.store.get(key) if self.off is None else None
        if isinstance(stored, str):
            with contextlib.suppress(ValueError):  # written by an older output model: ask again
                reply = response_model.model_validate_json(stored)
                self.hits += 1
                record(_CACHED)
                return reply
        self.misses += 1
        reply = await super().agenerate(prompt, response_model)
        if self.off is None:
            await self._keep(key, reply)
        return reply

    async def _keep(self, key: str, reply: Reply) -> None:
        """Store ``reply`` in the writer thread; a store that cannot be written: warn once, off."""
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(
                _writer(os.getpid()), self.store.set, key, reply.model_dump_json()
            )
        except CacheError as exc:
            if self.off is not None:  # another write failed first and said so
                return
            self.off = str(exc)
            print(
                f"ragas-relevancy: warning: {exc}; the judge cache is off for the rest of this "
                "run (rows are scored as usual)",
                file=sys.stderr,
                flush=True,
            )
