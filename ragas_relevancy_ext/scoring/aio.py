"""Async written once: the one place that runs a sync client off the loop, or async from sync."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

from .usage import PROVIDER_REPORTS, estimate_tokens

T = TypeVar("T")

__all__ = ["DEFAULT_MAX_CONCURRENCY", "PerLoop", "request", "run_method", "run_sync", "send"]

# Judge and embedding calls in flight at once: the metric's ``max_concurrency`` and the command
# line's ``--concurrency`` default. Kept here, where nothing heavy loads, so ``--help`` shows it.
DEFAULT_MAX_CONCURRENCY = 16
# Tries of one request answered 429 inside a run that keeps to the provider's rate limits.
RATE_LIMIT_ATTEMPTS = 6


async def run_method(obj: Any, async_name: str, sync_name: str, *args: Any, **kwargs: Any) -> Any:
    """``await obj.<async_name>(...)``, or ``obj.<sync_name>(...)`` in a worker thread when
    ``obj`` sits on a synchronous client (``is_async`` False), so the loop is never blocked."""
    if getattr(obj, "is_async", True) is False:
        return await asyncio.to_thread(getattr(obj, sync_name), *args, **kwargs)
    return await getattr(obj, async_name)(*args, **kwargs)


def request(limiter: Any, kind: str, texts: str | Sequence[str], budget: int = 0) -> Any:
    """What one request holds while it is sent: a run's slot and rate limits (a run's row,
    whose ``call`` takes the request's kind and estimated tokens: its texts', plus ``budget``
    reply tokens asked for), any other async context manager as it is, or nothing."""
    if callable(getattr(limiter, "call", None)):
        return limiter.call(kind, estimate_tokens(texts) + budget, budget)
    return limiter if limiter is not None else contextlib.nullcontext()


def rate_limited(limiter: Any, kind: str, exc: BaseException) -> bool:
    """Whether ``exc`` is the provider's 429 and ``limiter`` (a run's row) keeps to rate
    limits: then the run is told (it pauses every request of ``kind``) and True, so the call
    may be asked again; False otherwise."""
    from ..errors import Cause, cause_of

    note = getattr(limiter, "rate_limited", None)
    if not callable(note) or cause_of(exc) != Cause.RATE_LIMITED:
        return False
    note(kind, exc)
    return True


async def send(
    limiter: Any,
    kind: str,
    texts: str | Sequence[str],
    make: Callable[[], Awaitable[T]],
    budget: int = 0,
) -> T:
    """``await make()`` holding what :func:`request` gives; answered 429 in a run that keeps to
    rate limits, asked again after the run's pause, up to ``RATE_LIMIT_ATTEMPTS`` tries (the
    SDK of a client the package built then leaves its 429s to the run)."""
    asks_again = callable(getattr(limiter, "rate_limited", None))
    for attempt in range(1, RATE_LIMIT_ATTEMPTS + 1):
        try:
            async with request(limiter, kind, texts, budget):
                with PROVIDER_REPORTS.run_asks_again() if asks_again else contextlib.nullcontext():
                    return await make()
        except Exception as exc:
            if attempt == RATE_LIMIT_ATTEMPTS or not rate_limited(limiter, kind, exc):
                raise
    raise AssertionError("unreachable: the last try returns or raises")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end from sync code; in a worker thread when a loop is running (in
    the caller's context, so its current span and meter reach the calls)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragas-relevancy-sync") as pool:
        return pool.submit(contextvars.copy_context().run, asyncio.run, coro).result()


class PerLoop(Generic[T]):
    """One ``make()`` per running event loop, as asyncio's locks and semaphores belong to the
    loop they first wait in (a sync call runs a loop of its own); a copy or pickle starts empty."""

    def __init__(self, make: Callable[[], T]) -> None:
        self.make = make
        self._made: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> T:
        """The running loop's own, made on its first use."""
        loop = asyncio.get_running_loop()
        if loop not in self._made:
            self._made[loop] = self.make()
        return self._made[loop]

    def __reduce__(self) -> tuple[Any, ...]:
        return (PerLoop, (self.make,))
