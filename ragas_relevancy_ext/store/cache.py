"""A judge that keeps its replies on disk (JSON text in SQLite), so a re-run asks the real judge
nothing. A store that cannot be used costs the store, never a score; it is used off the event
loop, and a reply is stored before it is used."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import os
import sys
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
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
    """Answers from ``store`` when it can, else asks ``inner`` and stores the reply; ``model``
    names the judge in the key, ``off`` says why the store was switched off (``kind`` names it)."""

    def __init__(self, inner: Judge, store: ReplyStore, model: str, kind: str = "judge cache"):
        super().__init__(inner)
        self.store = store
        self.model = model
        self.kind = kind
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
        stored = await self._use(None, self.store.get, key)  # reads: the loop's own threads
        if isinstance(stored, str):
            with contextlib.suppress(ValueError):  # written by an older output model: ask again
                reply = response_model.model_validate_json(stored)
                self.hits += 1
                record(_CACHED)
                return reply
        self.misses += 1
        reply = await super().agenerate(prompt, response_model)
        await self._use(_writer(os.getpid()), self.store.set, key, reply.model_dump_json())
        return reply

    async def _use(self, threads: Executor | None, method: Callable[..., Any], *args: Any) -> Any:
        """``method(*args)`` of the store in ``threads``; a store that fails: warn once, off."""
        if self.off is not None:
            return None
        try:
            return await asyncio.get_running_loop().run_in_executor(threads, method, *args)
        except CacheError as exc:
            if self.off is not None:  # another call failed first and said so
                return None
            self.off = str(exc)
            print(
                f"ragas-relevancy: warning: {exc}; the {self.kind} is off for the rest of this "
                "run (rows are scored as usual)",
                file=sys.stderr,
                flush=True,
            )
            return None
