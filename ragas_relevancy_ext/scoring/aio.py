"""Async written once: the one place that runs a sync client off the loop, or async from sync."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .usage import estimate_tokens

T = TypeVar("T")

__all__ = ["DEFAULT_MAX_CONCURRENCY", "call", "request", "run_sync", "send"]

# Judge and embedding calls in flight at once: the metric's ``max_concurrency`` and the command
# line's ``--concurrency`` default. Kept here, where nothing heavy loads, so ``--help`` shows it.
DEFAULT_MAX_CONCURRENCY = 16


async def call(obj: Any, async_name: str, sync_name: str, *args: Any, **kwargs: Any) -> Any:
    """``await obj.<async_name>(...)``, or ``obj.<sync_name>(...)`` in a worker thread when
    ``obj`` sits on a synchronous client (``is_async`` False), so the loop is never blocked."""
    if getattr(obj, "is_async", True) is False:
        return await asyncio.to_thread(getattr(obj, sync_name), *args, **kwargs)
    return await getattr(obj, async_name)(*args, **kwargs)


def request(limiter: Any, kind: str, texts: str | Sequence[str], budget: int = 0) -> Any:
    """What one request holds while it is sent: its key's rate limit, then a run's slot (a run's
    row, whose ``call`` takes the request's kind and estimated tokens: its texts', plus
    ``budget`` reply tokens asked for), any other async context manager as it is, or nothing."""
    if callable(getattr(limiter, "call", None)):
        return limiter.call(kind, estimate_tokens(texts) + budget)
    return limiter if limiter is not None else contextlib.nullcontext()


def asks_again(limiter: Any, kind: str, exc: BaseException) -> bool:
    """Whether ``exc`` is the provider's 429 and ``limiter`` (a run's row) keeps to rate limits:
    then the key's limit is told (it pauses the key) and True, so the call is asked again; the
    limit raises :class:`.errors.PatienceExhausted` once no request has succeeded for the run's
    patience. False otherwise."""
    from ..errors import Cause, cause_of

    note = getattr(limiter, "rate_limited", None)
    return callable(note) and cause_of(exc) == Cause.RATE_LIMITED and note(kind, exc)


async def send(
    limiter: Any,
    kind: str,
    texts: str | Sequence[str],
    make: Callable[[], Awaitable[T]],
    budget: int = 0,
) -> T:
    """``await make()`` holding what :func:`request` gives; answered 429 in a run that keeps to
    rate limits, asked again after the key's pause, until the run's patience runs out."""
    while True:
        try:
            async with request(limiter, kind, texts, budget):
                return await make()
        except Exception as exc:
            if not asks_again(limiter, kind, exc):
                raise


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end from sync code; in a worker thread when a loop is running (in
    the caller's context, so its current span and meter reach the calls)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragas-relevancy-sync") as pool:
        return pool.submit(contextvars.copy_context().run, asyncio.run, coro).result()
