"""One run's scheduler: the tasks the run starts, its requests in flight and when rows stop.

A :class:`Scheduler` per run (``ascore``, ``ascore_each``, one ``ragas.evaluate`` run): at most
``limit`` requests in flight, each waiting first for its key's limit (:mod:`.limits`, holding
nothing) and then for a slot, where calls of rows under way go ahead of rows not begun, which
wait one behind another. Every task the run starts ends with it (Python 3.10 has no
``asyncio.TaskGroup``, and an anyio task group cannot be held across an async generator's
``yield``). Once :meth:`Scheduler.stop_new_rows` is called, a row that has sent nothing is
refused (:class:`RowNotStarted`) and a row that has sent a request finishes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine, Mapping
from typing import Any, TypeVar

from ..errors import PatienceExhausted
from ..scoring.usage import listening
from .limits import KeyLimit

__all__ = ["Row", "RowNotStarted", "Scheduler"]

T = TypeVar("T")


class RowNotStarted(Exception):
    """A row's first call was refused: the run was told to start no more rows."""


class Scheduler:
    """At most ``limit`` requests in flight, each after its key's limit (``limits``, by kind);
    owns the run's tasks.

    With ``cautious``, one request goes at a time until one succeeds (its ``async with`` block
    raises nothing): a judge that refuses every request is found out after one, not ``limit``.
    """

    def __init__(
        self, limit: int, *, cautious: bool = False, limits: Mapping[str, KeyLimit] | None = None
    ) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a whole number >= 1, got {limit!r}")
        self.limit = limit
        self.limits = dict(limits or {})
        self._slots = asyncio.Semaphore(1 if cautious else limit)
        self._held_back = limit - 1 if cautious else 0  # given out at the first success
        self._entry = asyncio.Lock()  # the line of rows not begun
        self.in_flight = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self.stopping = self.closed = False
        self.gave_up: PatienceExhausted | None = None  # a key's patience ran out

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
        """Start nothing more, refuse every row that has sent nothing and cancel the run's
        tasks, at once."""
        self.closed = self.stopping = True
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
            # ended; from Python 3.12 awaiting ended tasks yields nothing, so their done
            # callbacks (which drop them from the set) have not run yet
            self._tasks.difference_update(tasks)

    async def __aenter__(self) -> Scheduler:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def row(self) -> Row:
        """The calls of one row."""
        return Row(self)

    def slot(self) -> Row:
        """Calls of no row in particular (a shared embedding request): never refused."""
        return Row(self, sent=True)

    def stop_new_rows(self) -> None:
        """Refuse the calls of every row that has sent nothing, from now on."""
        self.stopping = True

    def _refuse(self, row: Row) -> None:
        if self.closed or (self.stopping and not row.sent):
            raise RowNotStarted("the run is stopping")

    async def _acquire(self, row: Row) -> None:
        self._refuse(row)
        if row.sent:
            await self._slots.acquire()
        else:  # one row not begun waits for a slot at a time: calls of rows under way go first
            async with self._entry:
                self._refuse(row)
                await self._slots.acquire()
        try:
            self._refuse(row)  # handed a slot as the run began to stop
        except RowNotStarted:
            self._slots.release()
            raise
        self.in_flight += 1

    def _release(self, succeeded: bool = False) -> None:
        """Free the slot; the first call that ``succeeded`` also frees the slots a cautious
        start held back."""
        self.in_flight -= 1
        held, self._held_back = (self._held_back, 0) if succeeded else (0, self._held_back)
        for _ in range(held + 1):
            self._slots.release()


class Row:
    """``async with row``: one call of a row, holding one of the run's slots while it runs.

    A row has ``sent`` once one of its calls has begun; from then on none of its calls is
    refused by a stop.
    """

    __slots__ = ("scheduler", "sent")

    def __init__(self, scheduler: Scheduler, sent: bool = False) -> None:
        self.scheduler = scheduler
        self.sent = sent

    async def __aenter__(self) -> None:
        await self.scheduler._acquire(self)
        self.sent = True

    async def __aexit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.scheduler._release(succeeded=kind is None)

    def rate_limited(self, kind: str, exc: BaseException) -> bool:
        """A ``kind`` call was answered 429: True (ask again after the key's pause), False with
        no limit for ``kind``; PatienceExhausted, noted as the run's ``gave_up``, at the end."""
        run, limit = self.scheduler, self.scheduler.limits.get(kind)
        try:
            return limit is not None and limit.rate_limited(exc)
        except PatienceExhausted as gave_up:
            run.gave_up = run.gave_up or gave_up
            raise

    @contextlib.asynccontextmanager
    async def call(self, kind: str, tokens: int) -> AsyncIterator[None]:
        """One ``kind`` request of about ``tokens``: its key's limit, then a slot; the provider's
        answers reach the key's limit."""
        limit = self.scheduler.limits.get(kind)
        if limit is None:
            async with self:
                yield
            return
        run = self.scheduler
        run._refuse(self)
        held = succeeded = False
        try:
            while True:  # waiting for the key holds no slot; found changed once in one: again
                changes = await limit.wait(tokens)
                await run._acquire(self)
                if limit.changes == changes:
                    break
                run._release()
            held = self.sent = True
            limit.left()
            with listening(limit):
                yield
            succeeded = True
        finally:
            if held:
                run._release(succeeded)
            limit.ended()  # the first request's end, whatever it was, lets the others go
        limit.succeeded()
