"""One run's scheduler: the tasks the run starts, its requests in flight and which goes next.

A :class:`Scheduler` is made per run (``ascore``, ``ascore_each``, one ``ragas.evaluate`` run)
and passed to what needs it. It is the run's only limiter: at most ``limit`` judge and embedding
requests in flight, a waiting request of an earlier row served before one of a later row, and
every task the run starts belongs to it and ends with it (closing cancels them and waits, and
nothing starts after). Python 3.10 has no ``asyncio.TaskGroup`` and an anyio task group cannot
be held across an async generator's ``yield``, so the scheduler keeps its own set of tasks with
the same rule: no task outlives the run.

A row's calls go through ``async with scheduler.row(p)``. Once :meth:`Scheduler.stop_new_rows`
is called, a row that has sent nothing is refused (:class:`RowNotStarted`) and a row that has
sent a request keeps going, so it finishes and is counted.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["Row", "RowNotStarted", "Scheduler"]

T = TypeVar("T")


class RowNotStarted(Exception):
    """A row's first call was refused: the run was told to start no more rows."""


class _Waiter:
    """One call waiting for a slot; ``granted`` once a slot is handed to it (it then owns it)."""

    __slots__ = ("future", "granted", "row")

    def __init__(self, row: Row) -> None:
        self.row = row
        self.future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.granted = False


class Scheduler:
    """At most ``limit`` requests in flight, earlier rows first; owns the run's tasks.

    With ``cautious``, one request goes at a time until one succeeds (its ``async with`` block
    raises nothing): a judge that refuses every request is found out after one, not ``limit``.
    """

    def __init__(self, limit: int, *, cautious: bool = False) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a whole number >= 1, got {limit!r}")
        self.limit = limit
        self._free = 1 if cautious else limit
        self._held_back = limit - 1 if cautious else 0  # given out at the first success
        self._waiting: list[tuple[float, int, _Waiter]] = []
        self._arrivals = itertools.count()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.stopping = False
        self.closed = False
        self.frontier = 0.0  # the latest row whose call has been given a slot
        self.on_frontier: list[Callable[[float], None]] = []  # told when it moves on
        self.on_free: list[Callable[[], None]] = []  # told when a slot is left free

    # -- the run's tasks ----------------------------------------------------------------------

    def start(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``coro`` as a task of this run; RuntimeError once the run is closed."""
        if self.closed:
            coro.close()
            raise RuntimeError("the run is closed: it starts no more tasks")
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @property
    def tasks(self) -> int:
        """Tasks of the run still running."""
        return len(self._tasks)

    def cancel(self) -> None:
        """Start nothing more, refuse every waiting call and cancel the run's tasks, at once."""
        self.closed = True
        self.stop_new_rows()
        for task in self._tasks:
            task.cancel()

    async def aclose(self) -> None:
        """:meth:`cancel`, then wait for the run's tasks to end."""
        self.cancel()
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def __aenter__(self) -> Scheduler:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- rows and their calls -----------------------------------------------------------------

    def row(self, priority: float) -> Row:
        """The calls of one row, started ``priority``-th (lower goes first)."""
        return Row(self, priority)

    def ahead(self) -> Row:
        """Calls that finish rows already under way (a shared embedding request): ahead of
        every row's waiting call, never refused."""
        return Row(self, float("-inf"), sent=True)

    def slot(self, priority: float = float("inf")) -> Row:
        """Calls of no row in particular, at ``priority`` (by default behind every row's
        waiting call); never refused."""
        return Row(self, priority, sent=True)

    def stop_new_rows(self) -> None:
        """Refuse the calls of every row that has sent nothing, those waiting included."""
        self.stopping = True
        kept = []
        for entry in self._waiting:
            waiter = entry[2]
            if waiter.future.done():
                continue
            if self.closed or not waiter.row.sent:
                waiter.future.set_exception(RowNotStarted("the run is stopping"))
            else:
                kept.append(entry)
        heapq.heapify(kept)
        self._waiting = kept

    @property
    def saturated(self) -> bool:
        """Whether every slot is taken (a call asked now would wait)."""
        return self._free == 0 or bool(self._waiting)

    @property
    def in_flight(self) -> int:
        """Slots held now."""
        return self.limit - self._held_back - self._free

    async def _acquire(self, row: Row) -> None:
        if self.closed or (self.stopping and not row.sent):
            raise RowNotStarted("the run is stopping")
        if self._free > 0 and not self._waiting:
            self._free -= 1
            self._note(row)
            return
        waiter = _Waiter(row)
        heapq.heappush(self._waiting, (row.priority, next(self._arrivals), waiter))
        try:
            await waiter.future
        except BaseException:
            if waiter.granted:  # handed a slot just as it was cancelled: give it on
                self._release()
            raise
        if self.stopping and not row.sent:  # handed a slot just before the run began to stop
            self._release()
            raise RowNotStarted("the run is stopping")
        self._note(row)

    def _note(self, row: Row) -> None:
        if row.priority != float("inf") and row.priority > self.frontier:
            self.frontier = row.priority
            for listener in self.on_frontier:
                listener(row.priority)

    def _release(self, succeeded: bool = False) -> None:
        """Hand the slot to the first live waiter, or free it; the first call that
        ``succeeded`` also frees the slots a cautious start held back."""
        if succeeded and self._held_back:
            held, self._held_back = self._held_back, 0
            for _ in range(held):
                self._hand_over()
        self._hand_over()

    def _hand_over(self) -> None:
        while self._waiting:
            _, _, waiter = heapq.heappop(self._waiting)
            if not waiter.future.done():
                waiter.granted = True
                waiter.future.set_result(None)
                return
        self._free += 1
        for listener in self.on_free:
            listener()

    def __repr__(self) -> str:
        return f"Scheduler(limit={self.limit}, in_flight={self.in_flight}, tasks={self.tasks})"


class Row:
    """``async with row``: one call of a row, holding one of the run's slots while it runs.

    A row has ``sent`` once one of its calls has begun; from then on none of its calls is
    refused by a stop.
    """

    __slots__ = ("priority", "scheduler", "sent")

    def __init__(self, scheduler: Scheduler, priority: float, sent: bool = False) -> None:
        self.scheduler = scheduler
        self.priority = priority
        self.sent = sent

    async def __aenter__(self) -> None:
        await self.scheduler._acquire(self)
        self.sent = True

    async def __aexit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.scheduler._release(succeeded=kind is None)
