"""Async written once: the one place that runs a sync client off the loop, or async from sync."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, Protocol, TypeAlias, TypeGuard, TypeVar, cast

from .usage import estimate_tokens

T = TypeVar("T")

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "Limiter",
    "PerLoop",
    "RunRow",
    "request",
    "run_method",
    "run_sync",
    "send",
]

# Judge and embedding calls in flight at once: the metric's ``max_concurrency`` and the command
# line's ``--concurrency`` default. Kept here, where nothing heavy loads, so ``--help`` shows it.
DEFAULT_MAX_CONCURRENCY = 16


class RunRow(Protocol):
    """A run's row (``run.scheduler.Row``): each request takes its key's limit, then a slot."""

    def call(self, kind: str, tokens: int) -> contextlib.AbstractAsyncContextManager[None]: ...

    def rate_limited(self, kind: str, exc: BaseException) -> bool: ...


# What a request holds while it is sent: a run's row, any async context manager, or nothing.
Limiter: TypeAlias = "RunRow | contextlib.AbstractAsyncContextManager[Any] | None"


def _is_row(limiter: Limiter) -> TypeGuard[RunRow]:
    """Whether ``limiter`` is a run's row, by its type's method (an ``isinstance`` of a runtime
    protocol costs about 0.1 ms, on every request)."""
    return hasattr(type(limiter), "rate_limited")


async def run_method(obj: Any, async_name: str, sync_name: str, *args: Any, **kwargs: Any) -> Any:
    """``await obj.<async_name>(...)``, or ``obj.<sync_name>(...)`` in a worker thread when
    ``obj`` sits on a synchronous client (``is_async`` False), so the loop is never blocked."""
    if getattr(obj, "is_async", True) is False:
        return await asyncio.to_thread(getattr(obj, sync_name), *args, **kwargs)
    return await getattr(obj, async_name)(*args, **kwargs)


def request(
    limiter: Limiter, kind: str, texts: str | Sequence[str], budget: int = 0
) -> contextlib.AbstractAsyncContextManager[Any]:
    """What one request holds while it is sent: a run's row's ``call`` (of the request's kind
    and estimated tokens: its texts', plus ``budget`` reply tokens), else ``limiter`` itself."""
    if _is_row(limiter):
        return limiter.call(kind, estimate_tokens(texts) + budget)
    if limiter is None:
        return contextlib.nullcontext()
    return cast("contextlib.AbstractAsyncContextManager[Any]", limiter)  # not a row: checked


def asks_again(limiter: Limiter, kind: str, exc: BaseException) -> bool:
    """Whether ``exc`` is the provider's 429 and ``limiter`` is a run's row: then its key pauses
    and the call is asked again (:class:`.errors.PatienceExhausted` once patience runs out)."""
    from ..errors import Cause, cause_of

    if not _is_row(limiter) or cause_of(exc) != Cause.RATE_LIMITED:
        return False
    return limiter.rate_limited(kind, exc)


async def send(
    limiter: Limiter,
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
