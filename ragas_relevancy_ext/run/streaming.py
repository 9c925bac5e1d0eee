"""Many samples with bounded memory: a window of rows in flight, and when a run should stop.

:func:`bounded_map` pulls inputs lazily and keeps at most ``window`` of them in flight, as
tasks of the run's :class:`.Scheduler`, so a file of any length costs the memory of ``window``
rows; rows not begun take their turn in order, so rows finish roughly in the order they started
and each can be saved at once. :class:`EarlyStop` says when a run is hopeless.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import PERMANENT, Cause, cause_phrase

if TYPE_CHECKING:
    from ..scoring.report import RelevancyReport
    from .scheduler import Scheduler

__all__ = ["EARLY_STOP_ROWS", "EarlyStop", "bounded_map"]

# Samples finished one after another with the same cause no retry mends before a run stops.
EARLY_STOP_ROWS = 3

T = TypeVar("T")
R = TypeVar("R")


class EarlyStop:
    """Watches finished samples: ``rows`` of them NaN one after another with the same cause that
    no retry mends (:data:`.errors.PERMANENT`: a refused key, an account out of quota, an
    unknown model, a server not reached) mean the run should stop, as does a key's patience run
    out (no request succeeded for that long). Any other outcome starts the count again."""

    def __init__(self, rows: int = EARLY_STOP_ROWS):
        if rows < 1:
            raise ValueError(f"rows must be >= 1, got {rows}")
        self.rows = rows
        self.cause: Cause | None = None
        self.count = 0
        self.example = ""
        self.stopped = False

    def note(self, report: RelevancyReport, gave_up: BaseException | None = None) -> bool:
        """Count one finished sample (``gave_up``: the run's patience ran out, then); True
        once, when the run should stop."""
        cause = report.cause if report.score != report.score else None  # NaN: not measured
        if self.stopped:
            return False
        if gave_up is not None:
            self.cause, self.example, self.count = Cause.RATE_LIMITED, str(gave_up), 1
            self.stopped = True
            return True
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

        if self.cause is Cause.RATE_LIMITED:  # the patience ran out
            return f"{self.example}; --patience SECONDS waits longer"
        return (
            f"{plural(self.count, 'row')} failed with {self.cause} "
            f"({cause_phrase(self.cause)}: {clip(self.example, 240)})"
        )


async def bounded_map(
    items: Iterable[T] | AsyncIterable[T],
    work: Callable[[int, T], Coroutine[Any, Any, R]],
    window: int,
    scheduler: Scheduler,
) -> AsyncIterator[tuple[int, R]]:
    """``(index, await work(index, item))`` as each finishes, at most ``window`` at once, each
    a task of ``scheduler``.

    Items are pulled only when a place in the window is free, so an endless or huge source
    costs the memory of ``window`` items. ``work`` should not raise (an exception propagates
    and the rest is cancelled). Closing the generator cancels the work in flight and waits for
    it to end.
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
                task = scheduler.start(work(index, item))
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
