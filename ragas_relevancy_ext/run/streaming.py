"""Many samples with bounded memory: a window of rows in flight, and when a run should stop.

:func:`bounded_map` pulls inputs lazily and keeps at most ``window`` of them in flight, as
tasks of the run's :class:`.Scheduler`, so a file of any length costs the memory of ``window``
rows; rows not begun take their turn in order, so rows finish roughly in the order they started
and each can be saved at once. :class:`EarlyStop` says when a run is hopeless.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Coroutine, Iterable
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
) -> AsyncGenerator[tuple[int, R], None]:
    """``(index, await work(index, item))`` as each finishes, at most ``window`` at once, each
    a task of ``scheduler``.

    Items are pulled only when a place in the window is free, so an endless or huge source
    costs the memory of ``window`` items; while an async source waits for its next item, the
    items that finish meanwhile still come out. ``work`` should not raise (an exception
    propagates and the rest is cancelled). Closing the generator cancels the work in flight
    (and the wait for the next item) and waits for it to end.
    """
    pull = _puller(items)
    running: dict[asyncio.Task[R], int] = {}
    finished: list[asyncio.Task[R]] = []  # filled by each task's done callback: no scan of all
    wake = asyncio.Event()

    def on_done(task: asyncio.Task[R]) -> None:
        finished.append(task)
        wake.set()

    exhausted = False
    coming: asyncio.Future[T] | None = None  # the next item, pulled but maybe not there yet
    index = 0
    try:
        while True:
            while not exhausted and len(running) < window:
                if coming is None:
                    coming = pull()
                    if not coming.done():
                        coming.add_done_callback(lambda _: wake.set())
                if not coming.done():
                    break  # an async source is waiting: what finishes meanwhile goes out
                next_item, coming = coming, None
                try:
                    item = next_item.result()
                except StopAsyncIteration:
                    exhausted = True
                    break
                task = scheduler.start(work(index, item))
                task.add_done_callback(on_done)
                running[task] = index
                index += 1
            if not running and coming is None:
                return
            if not finished:
                wake.clear()
                await wake.wait()
            done = list(finished)  # in the order they finished
            finished.clear()
            for task in done:
                yield running.pop(task), task.result()
    finally:
        waiting: list[asyncio.Future[Any]] = [*running, *([coming] if coming else [])]
        for future in waiting:
            future.cancel()
        if waiting:
            await asyncio.gather(*waiting, return_exceptions=True)


def _puller(items: Iterable[T] | AsyncIterable[T]) -> Callable[[], asyncio.Future[T]]:
    """A future of the next item of a sync or async iterable (StopAsyncIteration at the end):
    done at once for a sync one, a task of the loop for an async one."""
    if isinstance(items, AsyncIterable):
        iterator = aiter(items)
        return lambda: asyncio.ensure_future(anext(iterator))
    sync_iterator = iter(items)

    def pull() -> asyncio.Future[T]:
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        try:
            future.set_result(next(sync_iterator))
        except StopIteration:
            future.set_exception(StopAsyncIteration())
        except Exception as exc:  # the source's own error, raised where the item is read
            future.set_exception(exc)
        return future

    return pull
