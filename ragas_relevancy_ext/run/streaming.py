"""Many samples with bounded memory: a window of rows in flight, calls of older rows first.

:func:`bounded_map` pulls inputs lazily and keeps at most ``window`` of them in flight, so a
file of any length costs the memory of ``window`` rows. :class:`CallLimiter` caps judge and
embedding calls in flight; a row started earlier gets the next free slot before a row started
later, so rows finish roughly in the order they started and each can be saved at once.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import PERMANENT, Cause, cause_phrase

if TYPE_CHECKING:
    from ..scoring.report import RelevancyReport

__all__ = ["EARLY_STOP_ROWS", "CallLimiter", "EarlyStop", "RowNotStarted", "bounded_map"]

# Samples finished one after another with the same cause no retry mends before a run stops.
EARLY_STOP_ROWS = 3

T = TypeVar("T")
R = TypeVar("R")


class RowNotStarted(Exception):
    """A row's first call was refused: the run was told to start no more rows."""


class CallLimiter:
    """At most ``limit`` calls in flight; waiting calls go in order of their row's priority.

    ``limiter.slot(p)`` is an async context manager holding one slot; lower ``p`` goes first
    (ties in arrival order). A plain ``async with limiter`` waits behind every row. After
    :meth:`start_no_rows`, a row's slot that has never held a call raises
    :class:`RowNotStarted` instead of waiting, so a stopping run asks nothing for rows it had
    not begun. With ``cautious``, one call goes at a time until a call succeeds (a call is a
    success when its ``async with`` block raises nothing): a judge that refuses every request
    is found out after one request, not ``limit``.
    """

    def __init__(self, limit: int, cautious: bool = False):
        self._free = 1 if cautious else limit
        self._held_back = limit - 1 if cautious else 0  # given out at the first success
        self._waiting: list[tuple[float, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()
        self._unstarted: set[asyncio.Future[None]] = set()  # first calls of rows, waiting
        self.stopping = False

    def start_no_rows(self) -> None:
        """Refuse the first call of every row from now on, those waiting included."""
        self.stopping = True
        for future in self._unstarted:
            if not future.done():
                future.set_exception(RowNotStarted("the run is stopping"))
        self._unstarted.clear()

    def ahead(self) -> _Slot:
        """A slot ahead of every row's waiting call, never refused: for a request that
        finishes rows already begun (a full shared embedding request)."""
        return _Slot(self, float("-inf"), started=True)

    def slot(self, priority: float) -> _Slot:
        """One call's slot, for a row of ``priority`` (its start number)."""
        return _Slot(self, priority)

    async def acquire(self, priority: float = float("inf"), first: bool = False) -> None:
        """Wait for a free slot; earlier priorities are served first. ``first``: the first
        call of its row, refused with :class:`RowNotStarted` once the run is stopping."""
        if first and self.stopping:
            raise RowNotStarted("the run is stopping")
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (priority, next(self._arrivals), future))
        if first:
            self._unstarted.add(future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # the slot was handed over just as we were cancelled
            raise
        finally:
            self._unstarted.discard(future)
        if first and self.stopping:  # handed the slot just before the run began to stop
            self.release()
            raise RowNotStarted("the run is stopping")

    def release(self, succeeded: bool = False) -> None:
        """Hand the slot to the first live waiter, or free it; the first call that
        ``succeeded`` also frees the slots a cautious start held back."""
        if succeeded and self._held_back:
            held, self._held_back = self._held_back, 0
            for _ in range(held):
                self._hand_over()
        self._hand_over()

    def _hand_over(self) -> None:
        while self._waiting:
            _, _, future = heapq.heappop(self._waiting)
            if not future.done():
                future.set_result(None)
                return
        self._free += 1

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.release(succeeded=kind is None)


class EarlyStop:
    """Watches finished samples: ``rows`` of them NaN one after another with the same cause that
    no retry mends (:data:`.errors.PERMANENT`: a refused key, an unknown model, a server not
    reached) mean the run should stop. Any other outcome starts the count again."""

    def __init__(self, rows: int = EARLY_STOP_ROWS):
        if rows < 1:
            raise ValueError(f"rows must be >= 1, got {rows}")
        self.rows = rows
        self.cause: Cause | None = None
        self.count = 0
        self.example = ""
        self.stopped = False

    def note(self, report: RelevancyReport) -> bool:
        """Count one finished sample; True once, when the run should stop."""
        cause = report.cause if report.score != report.score else None  # NaN: not measured
        if self.stopped:
            return False
        if cause not in PERMANENT:
            self.cause, self.count = None, 0
            return False
        self.count = self.count + 1 if cause == self.cause else 1
        self.cause, self.example = Cause(cause), report.error or ""
        self.stopped = self.count >= self.rows
        return self.stopped

    def why(self) -> str:
        """``3 rows failed with auth (the judge refused the API key: <the error>)``."""
        if self.cause is None:
            return ""
        from ..scoring.report import clip, plural

        return (
            f"{plural(self.count, 'row')} failed with {self.cause} "
            f"({cause_phrase(self.cause)}: {clip(self.example, 240)})"
        )


class _Slot:
    """``async with limiter.slot(p)``: one slot at priority ``p``."""

    def __init__(self, limiter: CallLimiter, priority: float, started: bool = False):
        self._limiter = limiter
        self._priority = priority
        self._started = started  # a started row's calls are never refused

    async def __aenter__(self) -> None:
        await self._limiter.acquire(self._priority, first=not self._started)
        self._started = True

    async def __aexit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self._limiter.release(succeeded=kind is None)


async def bounded_map(
    items: Iterable[T] | AsyncIterable[T],
    work: Callable[[int, T], Awaitable[R]],
    window: int,
) -> AsyncIterator[tuple[int, R]]:
    """``(index, await work(index, item))`` as each finishes, at most ``window`` at once.

    Items are pulled only when a place in the window is free, so an endless or huge source
    costs the memory of ``window`` items. ``work`` should not raise (an exception propagates
    and the rest is cancelled). Closing the generator cancels the work in flight.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    pull = _puller(items)
    running: dict[asyncio.Task[R], int] = {}
    finished: list[asyncio.Task[R]] = []  # filled by each task's done callback: no scan of all
    wake = asyncio.Event()

    def on_done(task: asyncio.Task[R]) -> None:
        finished.append(task)
        wake.set()

    exhausted = False
    index = 0
    try:
        while True:
            while not exhausted and len(running) < window:
                try:
                    item = await pull()
                except StopAsyncIteration:
                    exhausted = True
                    break
                task = asyncio.ensure_future(work(index, item))
                task.add_done_callback(on_done)
                running[task] = index
                index += 1
            if not running:
                return
            if not finished:
                wake.clear()
                await wake.wait()
            done = list(finished)  # in the order they finished
            finished.clear()
            for task in done:
                yield running.pop(task), task.result()
    finally:
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)


def _puller(items: Iterable[Any] | AsyncIterable[Any]) -> Callable[[], Awaitable[Any]]:
    """An awaitable ``next`` over a sync or async iterable (StopAsyncIteration at the end)."""
    if isinstance(items, AsyncIterable):
        iterator = aiter(items)
        return lambda: anext(iterator)
    sync_iterator = iter(items)

    async def pull() -> Any:
        try:
            return next(sync_iterator)
        except StopIteration:
            raise StopAsyncIteration from None

    return pull
